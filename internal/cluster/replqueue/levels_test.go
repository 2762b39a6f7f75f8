package replqueue

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/queue"
)

// TestOpsListed: Ops lists exactly the ops Decode knows, so a new op cannot be added
// without the broker giving it a feature level.
func TestOpsListed(t *testing.T) {
	for op := range 256 {
		_, err := Decode([]byte{byte(op), 0, 0, 0})
		known := err == nil || !strings.Contains(err.Error(), "unknown op")
		if listed := slices.Contains(Ops(), Op(op)); known != listed {
			t.Errorf("op %d: Decode knows it %v, Ops lists it %v", op, known, listed)
		}
	}
}

// TestAdmitRefusesBeforeProposing: a command its admit function refuses is never
// proposed (the log holds nothing of it), and the queue goes on serving the others.
func TestAdmitRefusesBeforeProposing(t *testing.T) {
	c := newCluster(t, 1, 3, queue.Config{Visibility: time.Second})
	leader := c.elect()
	notYet := errors.New("not at this level yet")
	for _, nd := range c.nodes {
		nd.q.SetAdmit(func(op Op) error {
			if op == OpSend {
				return notYet
			}
			return nil
		})
	}
	if _, err := c.exec(leader, Command{Op: OpSend, Body: []byte("new kind")}); !errors.Is(err, notYet) {
		t.Fatalf("a refused op: %v", err)
	}
	if _, err := c.exec(leader, Command{Op: OpPut, Msgs: []Msg{{Body: []byte("ok")}}}); err != nil {
		t.Fatalf("an admitted op: %v", err)
	}
	if d := c.nodes[leader].sm.Depth(); d.Visible != 1 {
		t.Fatalf("after a refused send and an admitted put: %d visible, want the put's 1", d.Visible)
	}
	for _, nd := range c.nodes {
		nd.q.SetAdmit(nil)
	}
	if _, err := c.exec(leader, Command{Op: OpSend, Body: []byte("admitted now")}); err != nil {
		t.Fatalf("after the admit function was lifted: %v", err)
	}
}
