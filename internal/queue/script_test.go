package queue

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestScripts runs the data-driven scenarios in testdata/script (etcd raft's style): each
// block is a command, "----", and the output it must print. They read as the semantics do.
//
//	config fifo=true visibility=30s max-receives=3 lookahead=4 retention=1h max-extension=1m
//	send m1 [group=a] [delay=10s] [age=2h]   log a message sent now (age: that long ago)
//	gap 2                                    offsets that hold no message
//	at 30                                    the clock, in seconds from the start
//	receive [max=10] [vis=45s]               deliveries, dead letters, expiries
//	ack m1 [#1]   nack m1 [delay=5s] [reason=x]   extend m1 d=50s   (#n: the nth delivery's receipt)
//	crash [snapshot]                         rebuild from the journal (or snapshot + tail)
//	purge  stats
func TestScripts(t *testing.T) {
	files, _ := filepath.Glob("testdata/script/*.txt")
	if len(files) == 0 {
		t.Fatal("no scripts")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			s := &script{t: t, names: map[int64]string{}, offs: map[string]int64{}, receipts: map[string][]string{}}
			s.cfg = Config{}
			s.c = mustNew(t, s.cfg)
			s.run(string(data))
		})
	}
}

type script struct {
	t        *testing.T
	cfg      Config
	c        *Cursor
	log      testLog
	sec      int
	journal  []Event
	snap     []byte
	snapAt   int
	names    map[int64]string
	offs     map[string]int64
	receipts map[string][]string // by message name, in delivery order
}

func (s *script) run(text string) {
	blocks := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n\n")
	for _, b := range blocks {
		b = strings.TrimSpace(b)
		var lines []string
		for _, l := range strings.Split(b, "\n") {
			if !strings.HasPrefix(l, "#") && strings.TrimSpace(l) != "" {
				lines = append(lines, l)
			}
		}
		if len(lines) == 0 {
			continue
		}
		cmd, want := lines[0], ""
		if len(lines) > 1 {
			if lines[1] != "----" {
				s.t.Fatalf("%q: want ---- after the command", cmd)
			}
			want = strings.Join(lines[2:], "\n")
		}
		if got := strings.TrimSpace(s.do(cmd)); got != want {
			s.t.Errorf("t=%ds %s\n got:\n%s\n want:\n%s", s.sec, cmd, got, want)
		}
	}
}

// args splits "name k=v k=v" into the positional words and the keyed values.
func args(fields []string) (pos []string, kv map[string]string) {
	kv = map[string]string{}
	for _, f := range fields {
		if k, v, ok := strings.Cut(f, "="); ok {
			kv[k] = v
		} else {
			pos = append(pos, f)
		}
	}
	return pos, kv
}

func (s *script) dur(kv map[string]string, k string) time.Duration {
	if kv[k] == "" {
		return 0
	}
	d, err := time.ParseDuration(kv[k])
	if err != nil {
		s.t.Fatal(err)
	}
	return d
}

func (s *script) now() time.Time { return at(s.sec) }

func (s *script) do(line string) string {
	f := strings.Fields(line)
	pos, kv := args(f[1:])
	switch f[0] {
	case "config":
		s.cfg = Config{FIFO: kv["fifo"] == "true", Visibility: s.dur(kv, "visibility"),
			Retention: s.dur(kv, "retention"), MaxExtension: s.dur(kv, "max-extension")}
		s.cfg.MaxReceives, _ = strconv.Atoi(kv["max-receives"])
		s.cfg.Lookahead, _ = strconv.Atoi(kv["lookahead"])
		s.c = mustNew(s.t, s.cfg)
		s.snap = s.c.Snapshot()
		return ""
	case "send":
		sent := s.now().Add(-s.dur(kv, "age"))
		off := s.log.send(sent, kv["group"], s.dur(kv, "delay"))
		s.names[off], s.offs[pos[0]] = pos[0], off
		return ""
	case "gap":
		n, _ := strconv.Atoi(pos[0])
		s.log.gap(n)
		return ""
	case "at":
		s.sec, _ = strconv.Atoi(pos[0])
		return ""
	case "receive":
		return s.receive(kv)
	case "ack", "nack", "extend":
		return s.lease(f[0], pos, kv)
	case "crash":
		return s.crash(len(pos) > 0 && pos[0] == "snapshot")
	case "snapshot":
		s.snap, s.snapAt = s.c.Snapshot(), len(s.journal)
		return ""
	case "purge":
		s.journal = append(s.journal, s.c.Purge(s.now(), s.log.end)...)
		return s.stats()
	case "stats":
		return s.stats()
	}
	s.t.Fatalf("unknown command %q", line)
	return ""
}

func (s *script) secs(t time.Time) string { return fmt.Sprintf("%ds", int(t.Sub(t0)/time.Second)) }

func (s *script) receive(kv map[string]string) string {
	max := 10
	if kv["max"] != "" {
		max, _ = strconv.Atoi(kv["max"])
	}
	read := fill(s.c, &s.log, s.now())
	s.journal = append(s.journal, read...)
	ds, evs, err := s.c.Receive(s.now(), max, s.dur(kv, "vis"))
	if err != nil {
		return "error: " + err.Error()
	}
	s.journal = append(s.journal, evs...)
	evs = append(read, evs...)
	var out []string
	for _, ev := range evs {
		switch ev := ev.(type) {
		case Delivered:
			name := s.names[ev.Offset]
			s.receipts[name] = append(s.receipts[name], ev.delivery().Receipt)
			out = append(out, fmt.Sprintf("%s count=%d token=%d deadline=%s first=%s", name, ev.Count, ev.Token,
				s.secs(ev.Deadline), s.secs(ev.FirstAt)))
		case DeadLettered:
			out = append(out, fmt.Sprintf("dead %s count=%d first=%s last=%s reason=%q", s.names[ev.Offset], ev.Count,
				s.secs(ev.FirstAt), s.secs(ev.LastAt), ev.Reason))
		case Expired:
			out = append(out, fmt.Sprintf("expired %s", s.names[ev.From]))
		}
	}
	if len(ds) == 0 {
		out = append(out, "(no delivery)")
	}
	return strings.Join(out, "\n")
}

func (s *script) lease(op string, pos []string, kv map[string]string) string {
	rs := s.receipts[pos[0]]
	if len(rs) == 0 {
		s.t.Fatalf("%s: %s was never delivered", op, pos[0])
	}
	r := rs[len(rs)-1]
	if len(pos) > 1 {
		n, _ := strconv.Atoi(strings.TrimPrefix(pos[1], "#"))
		r = rs[n-1]
	}
	var evs []Event
	var err error
	switch op {
	case "ack":
		evs, err = s.c.Ack(s.now(), r)
	case "nack":
		evs, err = s.c.Nack(s.now(), r, s.dur(kv, "delay"), kv["reason"])
	case "extend":
		evs, err = s.c.Extend(s.now(), r, s.dur(kv, "d"))
	}
	s.journal = append(s.journal, evs...)
	for _, e := range []error{ErrReceiptStale, ErrReceiptInvalid, ErrNotInFlight, ErrExtensionLimit, ErrOutOfRange} {
		if errors.Is(err, e) {
			return strings.TrimPrefix(e.Error(), "queue: ")
		}
	}
	if err != nil {
		return err.Error()
	}
	return "ok"
}

// crash rebuilds the cursor and checks the durable state came back byte for byte.
func (s *script) crash(fromSnapshot bool) string {
	want := s.c.Snapshot()
	var c *Cursor
	tail := s.journal
	if fromSnapshot {
		var err error
		if c, err = Restore(s.cfg, s.snap); err != nil {
			s.t.Fatal(err)
		}
		tail = s.journal[s.snapAt:]
	} else {
		c = mustNew(s.t, s.cfg)
	}
	for _, ev := range tail {
		if err := c.Apply(ev); err != nil {
			s.t.Fatal(err)
		}
	}
	if !bytes.Equal(c.Snapshot(), want) {
		s.t.Fatal("rebuilt state differs")
	}
	s.c = c
	return fmt.Sprintf("replayed %d events; read from %d", len(tail), c.ReadPos())
}

func (s *script) stats() string {
	st := s.c.Stats(s.now())
	return fmt.Sprintf("in-flight=%d delayed=%d ready=%d blocked=%d floor=%d receives=%d redeliveries=%d dead=%d expired=%d",
		st.InFlight, st.Delayed, st.Ready, st.Blocked, s.c.Floor(), st.Receives, st.Redeliveries, st.DeadLettered, st.Expired)
}
