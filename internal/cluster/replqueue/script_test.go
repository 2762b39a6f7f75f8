package replqueue

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/queue"
)

// TestScripts runs testdata/*.txt: scenarios of client calls and faults on three nodes.
// Each line is one step; the client follows NOT_LEADER hints to the leader.
//
//	send BODY [via NODE] [expect ok|unknown]   a Send (default: through the leader, ok)
//	receive NAME BODY|empty [vis DUR] [via NODE]  a Receive of one; NAME keeps the receipt
//	ack|nack NAME ok|stale [via NODE]           Ack or Nack (delay 0) of NAME's receipt
//	extend NAME DUR ok|stale|notinflight        Extend
//	kill|partition|restart NODE                 NODE: leader, old (the last victim), nN
//	heal | elect | tick N | advance DUR | skew nN DUR | replicas-agree
func TestScripts(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no scripts")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			for seed := int64(1); seed <= 3; seed++ {
				runScript(t, f, seed)
			}
		})
	}
}

type scriptRun struct {
	t        *testing.T
	c        *cluster
	old      multiraft.NodeID
	receipts map[string]string
}

func runScript(t *testing.T, path string, seed int64) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := &scriptRun{t: t, c: newCluster(t, seed, 3, queue.Config{Visibility: 30 * time.Second}),
		receipts: map[string]string{}}
	s.c.elect()
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if i := strings.Index(line, "#"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if line == "" {
			continue
		}
		if err := s.step(strings.Fields(line)); err != nil {
			t.Fatalf("%s:%d (seed %d): %s: %v", path, n, seed, line, err)
		}
	}
}

// opts pulls "key value" pairs off the end of a step.
func opts(f []string, keys ...string) ([]string, map[string]string) {
	o := map[string]string{}
	for again := true; again; {
		again = false
		for _, k := range keys {
			if len(f) >= 2 && f[len(f)-2] == k {
				o[k] = f[len(f)-1]
				f = f[:len(f)-2]
				again = true
			}
		}
	}
	return f, o
}

func (s *scriptRun) node(name string) (multiraft.NodeID, error) {
	switch {
	case name == "leader":
		return s.c.elect(), nil
	case name == "old":
		return s.old, nil
	case strings.HasPrefix(name, "n"):
		n, err := strconv.Atoi(name[1:])
		return multiraft.NodeID(n), err
	}
	return 0, fmt.Errorf("no node %q", name)
}

func (s *scriptRun) step(f []string) error {
	f, o := opts(f, "via", "expect", "vis")
	var via multiraft.NodeID
	if o["via"] != "" {
		var err error
		if via, err = s.node(o["via"]); err != nil {
			return err
		}
	}
	switch f[0] {
	case "send":
		_, err := s.c.exec(via, Command{Op: OpSend, Body: []byte(f[1])})
		return expectErr(err, or(o["expect"], "ok"))
	case "receive":
		vis, _ := time.ParseDuration(or(o["vis"], "0s"))
		r, err := s.c.exec(via, Command{Op: OpReceive, Max: 1, Timeout: vis})
		if err != nil {
			return err
		}
		got := "empty"
		if len(r.Deliveries) == 1 {
			got = string(r.Deliveries[0].Body)
			s.receipts[f[1]] = r.Deliveries[0].Receipt
		}
		if got != f[2] {
			return fmt.Errorf("received %s, want %s", got, f[2])
		}
		return nil
	case "ack", "nack", "extend":
		cmd := Command{Op: OpAck, Receipt: s.receipts[f[1]]}
		want := f[2]
		switch f[0] {
		case "nack":
			cmd.Op = OpNack
		case "extend":
			d, err := time.ParseDuration(f[2])
			if err != nil {
				return err
			}
			cmd.Op, cmd.Timeout, want = OpExtend, d, f[3]
		}
		_, err := s.c.exec(via, cmd)
		return expectErr(err, want)
	case "kill", "partition", "restart":
		id, err := s.node(f[1])
		if err != nil {
			return err
		}
		switch f[0] {
		case "kill":
			s.c.kill(id)
		case "restart":
			s.c.start(id)
		case "partition":
			var rest []multiraft.NodeID
			for _, o := range s.c.ids {
				if o != id {
					rest = append(rest, o)
				}
			}
			s.c.net.Partition(rest, []multiraft.NodeID{id})
		}
		s.old = id
	case "heal":
		s.c.net.Heal()
	case "elect":
		s.c.elect(s.old)
	case "tick":
		n, err := strconv.Atoi(f[1])
		for range n {
			s.c.tick()
		}
		return err
	case "advance":
		d, err := time.ParseDuration(f[1])
		s.c.advance += d
		return err
	case "skew":
		id, err := s.node(f[1])
		if err != nil {
			return err
		}
		d, err := time.ParseDuration(f[2])
		s.c.nodes[id].skew = d
		return err
	case "replicas-agree":
		return s.c.replicasAgree()
	default:
		return fmt.Errorf("unknown step %q", f[0])
	}
	return nil
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func expectErr(err error, want string) error {
	var ok bool
	switch want {
	case "ok":
		ok = err == nil
	case "unknown":
		ok = errors.Is(err, ErrOutcomeUnknown)
	case "stale":
		ok = errors.Is(err, queue.ErrReceiptStale)
	case "notinflight":
		ok = errors.Is(err, queue.ErrNotInFlight)
	default:
		return fmt.Errorf("unknown expectation %q", want)
	}
	if !ok {
		return fmt.Errorf("got error %v, want %s", err, want)
	}
	return nil
}

// replicasAgree ticks until every up replica applied the same index, then compares their
// snapshots byte for byte: apply is deterministic.
func (c *cluster) replicasAgree() error {
	for range 300 {
		up := c.up()
		same := true
		for _, nd := range up[1:] {
			same = same && nd.sm.Stats().Applied == up[0].sm.Stats().Applied
		}
		if same {
			want, _ := up[0].sm.Snapshot()
			for _, nd := range up[1:] {
				got, _ := nd.sm.Snapshot()
				if !bytes.Equal(got, want) {
					return fmt.Errorf("n%d's state differs from n%d's at index %d", nd.id, up[0].id, nd.sm.Stats().Applied)
				}
			}
			return nil
		}
		c.tick()
	}
	return errors.New("replicas never applied the same index")
}
