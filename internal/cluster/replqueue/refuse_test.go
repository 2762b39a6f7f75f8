package replqueue

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/queue"
)

// A command its replicas would refuse to decode (and so stop the group on) is refused by
// the proposer, and the group goes on serving.
func TestUndecodableCommandIsNotProposed(t *testing.T) {
	c := newCluster(t, 1, 3, queue.Config{Visibility: time.Second})
	long := strings.Repeat("r", MaxString+1)
	bad := []Command{
		{Op: OpAck, Receipt: long},
		{Op: OpNack, Receipt: "x", Delay: -time.Second},
		{Op: OpExtend, Receipt: "x", Timeout: -time.Second},
		{Op: OpSend, Body: []byte("b"), Attrs: []Attr{{Key: long, Value: "v"}}},
		{Op: OpSend, Body: []byte("b"), Delay: -1},
	}
	for _, cmd := range bad {
		if _, err := c.exec(0, cmd); !errors.Is(err, ErrBadCommand) {
			t.Errorf("%v: got %v, want ErrBadCommand", cmd.Op, err)
		}
	}
	if _, err := c.exec(0, Command{Op: OpSend, Body: []byte("ok")}); err != nil {
		t.Fatalf("the group stopped: %v", err)
	}
	r, err := c.exec(0, Command{Op: OpReceive, Max: 1})
	if err != nil || len(r.Deliveries) != 1 || string(r.Deliveries[0].Body) != "ok" {
		t.Fatalf("receive: %+v %v", r, err)
	}
}
