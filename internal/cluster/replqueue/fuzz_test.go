package replqueue

import (
	"reflect"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/queue"
)

func seedCommands() []Command {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	return []Command{
		{Op: OpSend, Origin: 1, Request: 2, Now: now, Body: []byte("hello"), Attrs: []Attr{{"b", "2"}, {"a", "1"}}, Delay: time.Second},
		{Op: OpReceive, Origin: 3, Request: 9, Now: now, Max: 10, Timeout: 30 * time.Second},
		{Op: OpAck, Origin: 1, Request: 3, Now: now, Receipt: "AQAAAAAAAAAAAAAAAAAAAAFmA4pf"},
		{Op: OpNack, Origin: 1, Request: 4, Now: now, Receipt: "x", Delay: time.Minute},
		{Op: OpExtend, Origin: 1, Request: 5, Now: now, Receipt: "y", Timeout: time.Hour},
		{Op: OpPut, Origin: 1, Request: 6, Now: now, Window: time.Minute, Msgs: []Msg{
			{Body: []byte("f"), Group: "g", DedupID: "d", Key: "k"}, {Body: []byte("h"), Attrs: []Attr{{"a", "1"}}, Delay: time.Second}}},
		{Op: OpReceiveLimited, Origin: 1, Request: 7, Now: now, Max: 3, Timeout: time.Second, MaxReceives: 2},
		{Op: OpDeadDone, Origin: 1, Request: 8, Now: now, Offsets: []int64{0}},
		{Op: OpPurge, Origin: 1, Request: 9, Now: now},
		{Op: OpConfigure, Origin: 1, Request: 10, Now: now, Times: Times{Visibility: time.Minute, MaxExtension: time.Hour, Retention: 2 * time.Hour}},
		{Op: OpNackReason, Origin: 1, Request: 11, Now: now, Receipt: "x", Delay: time.Minute, Reason: "downstream 503"},
	}
}

// FuzzDecode: no input panics the decoder, and what it accepts encodes back to a command
// that decodes to the same thing.
func FuzzDecode(f *testing.F) {
	for _, c := range seedCommands() {
		f.Add(c.Encode(nil))
	}
	f.Add([]byte{})
	f.Add([]byte{2, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Decode(b)
		if err != nil {
			return
		}
		again, err := Decode(c.Encode(nil))
		if err != nil {
			t.Fatalf("re-encoding of an accepted command refused: %v", err)
		}
		again.Attrs, c.Attrs = nil, nil // sorted by Encode; the order is not the decoder's
		for i := range c.Msgs {
			again.Msgs[i].Attrs, c.Msgs[i].Attrs = nil, nil
			if len(again.Msgs[i].Body) == 0 && len(c.Msgs[i].Body) == 0 {
				again.Msgs[i].Body, c.Msgs[i].Body = nil, nil
			}
		}
		if len(again.Body) == 0 && len(c.Body) == 0 {
			again.Body, c.Body = nil, nil
		}
		if !reflect.DeepEqual(again, c) {
			t.Fatalf("round trip changed the command:\n%+v\n%+v", c, again)
		}
	})
}

// FuzzRestore: no snapshot bytes panic Restore, and a refused snapshot is an error.
func FuzzRestore(f *testing.F) {
	m, err := NewMachine(1, queue.Config{})
	if err != nil {
		f.Fatal(err)
	}
	applyAll(f, m, seedCommands()...)
	snap, _ := m.Snapshot()
	f.Add(snap)
	f.Add([]byte{snapVersion})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, _ := NewMachine(1, queue.Config{})
		_ = m.Restore(b)
	})
}
