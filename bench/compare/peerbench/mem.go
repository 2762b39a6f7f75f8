package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// memory is a broker's resident memory. VmRSS is the main process's, as
// /proc/<pid>/status reports it. TreePss sums the proportional set size of
// the process and all its descendants, so a broker made of several
// processes (PostgreSQL's backends, RabbitMQ's helpers) is counted whole
// and memory they share is counted once.
type memory struct {
	PID       int   `json:"pid"`
	VmRSSKiB  int64 `json:"vmrss_kib"`
	TreePssKB int64 `json:"tree_pss_kib"`
	Processes int   `json:"processes"`
}

func memCmd(args []string) error {
	fs := flag.NewFlagSet("mem", flag.ExitOnError)
	pid := fs.Int("pid", 0, "broker process id")
	fs.Parse(args)
	m, err := readMemory(*pid)
	if err != nil {
		return err
	}
	return printJSON(m)
}

func readMemory(pid int) (memory, error) {
	m := memory{PID: pid}
	rss, err := procField(pid, "status", "VmRSS:")
	if err != nil {
		return m, err
	}
	m.VmRSSKiB = rss
	for _, p := range append([]int{pid}, descendants(pid)...) {
		if pss, err := procField(p, "smaps_rollup", "Pss:"); err == nil {
			m.TreePssKB += pss
			m.Processes++
		}
	}
	return m, nil
}

// procField reads a "<key> <n> kB" line of /proc/<pid>/<file>.
func procField(pid int, file, key string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == key {
			return strconv.ParseInt(f[1], 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/%s: no %s", pid, file, key)
}

// descendants lists every process whose ancestry reaches pid.
func descendants(pid int) []int {
	parent := map[int]int{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, s := range stats {
		b, err := os.ReadFile(s)
		if err != nil {
			continue
		}
		// The command name is in parentheses and may hold spaces: the
		// parent id is the second field after the last ')'.
		i := bytes.LastIndexByte(b, ')')
		f := strings.Fields(string(b[i+1:]))
		p, _ := strconv.Atoi(filepath.Base(filepath.Dir(s)))
		if len(f) >= 2 {
			parent[p], _ = strconv.Atoi(f[1])
		}
	}
	var out []int
	for p := range parent {
		for a, hops := parent[p], 0; a > 1 && hops < 64; a, hops = parent[a], hops+1 {
			if a == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}
