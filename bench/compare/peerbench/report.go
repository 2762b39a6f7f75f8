package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluice-mq/sluice/bench/compare/load"
)

// row is one line of a run's index.tsv, written by run.sh, with the
// results it names.
type row struct {
	Workload   string      `json:"workload"` // W1…W4
	System     string      `json:"system"`   // sluice, nats, …
	Config     string      `json:"config"`   // e.g. "fsync always", "quorum queue"
	Protocol   string      `json:"protocol"`
	SyncBefore bool        `json:"fsync_before_ack"`
	Durability string      `json:"durability"` // what is on disk when the ack is sent
	Result     load.Result `json:"result"`     // W1–W3, and W4's fill
	Empty      *memory     `json:"mem_empty,omitempty"`
	Full       *memory     `json:"mem_full,omitempty"`
}

func (r row) name() string { return r.System + " (" + r.Config + ")" }

// workloads says what each W measures, and which sluice protocol is
// compared with the peers (the one the goals name).
var workloads = []struct{ id, title, refProto string }{
	{"W1", "W1: durable produce, 1 KiB, 256 in flight", "kafka"},
	{"W2", "W2: queue round trip, 4 consumers, each message acked by itself", "native"},
	{"W3", "W3: end-to-end latency at 5,000 msgs/s for 10 s (from when each send was due)", "native"},
	{"W4", "W4: resident memory with a backlog waiting", "native"},
}

func reportCmd(args []string) error {
	fs := flag.NewFlagSet("report", flag.ExitOnError)
	dir := fs.String("dir", "", "results folder of one run (index.tsv, disk.json, meta.md)")
	fs.Parse(args)
	rows, err := readIndex(*dir)
	if err != nil {
		return err
	}
	var disk load.Disk
	if err := readJSON(filepath.Join(*dir, "disk.json"), &disk); err != nil {
		return err
	}
	meta, _ := os.ReadFile(filepath.Join(*dir, "meta.md"))
	var b strings.Builder
	b.WriteString(string(meta))
	fmt.Fprintf(&b, "\n**Physical limits measured in this run** — %s\n", disk)
	for _, w := range workloads {
		writeWorkload(&b, w.id, w.title, w.refProto, rows, disk)
	}
	if err := os.WriteFile(filepath.Join(*dir, "results.md"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	js, err := json.MarshalIndent(struct {
		Disk load.Disk `json:"disk"`
		Rows []row     `json:"rows"`
	}{disk, rows}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(*dir, "results.json"), js, 0o644)
}

// readIndex reads index.tsv: workload, system, config, protocol,
// fsync-before-ack (yes/no), durability, and the result file — for W4
// three comma-separated files: the fill's result, memory empty, memory
// full. A row whose file is missing (a failed step) is skipped.
func readIndex(dir string) ([]row, error) {
	f, err := os.Open(filepath.Join(dir, "index.tsv"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rows []row
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		c := strings.Split(sc.Text(), "\t")
		if len(c) != 7 {
			continue
		}
		r := row{Workload: c[0], System: c[1], Config: c[2], Protocol: c[3], SyncBefore: c[4] == "yes", Durability: c[5]}
		files := strings.Split(c[6], ",")
		var rep report
		if err := readJSON(filepath.Join(dir, files[0]), &rep); err != nil {
			fmt.Fprintf(os.Stderr, "skipping %s %s: %v\n", r.Workload, r.name(), err)
			continue
		}
		r.Result = rep.Result
		if len(files) == 3 {
			r.Empty, r.Full = &memory{}, &memory{}
			if readJSON(filepath.Join(dir, files[1]), r.Empty) != nil || readJSON(filepath.Join(dir, files[2]), r.Full) != nil {
				fmt.Fprintf(os.Stderr, "skipping %s %s: memory not read\n", r.Workload, r.name())
				continue
			}
		}
		rows = append(rows, r)
	}
	return rows, sc.Err()
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
