package replpart

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/replcursor"
	"github.com/sluice-mq/sluice/internal/queue"
)

// FuzzDecodeCursor: no input panics the cursor entry's decoder; what it accepts encodes to
// an entry that decodes the same.
func FuzzDecodeCursor(f *testing.F) {
	for _, e := range []CursorEntry{
		{Origin: 1, Request: 2, Now: time.Unix(5, 0), Sub: 3, Kind: CursorCreate, Config: CursorConfig{
			Queue: queue.Config{Visibility: time.Second, FIFO: true, Lookahead: 10}, Delay: time.Minute, FromEarliest: true}},
		{Origin: 1, Sub: 3, Kind: CursorDelete},
		{Sub: 3, Kind: replcursor.Receive, Op: replcursor.Op{Max: 10, Timeout: time.Second}},
		{Sub: 3, Kind: replcursor.Ack, Op: replcursor.Op{Receipt: "r"}},
		{Sub: 3, Kind: replcursor.Nack, Op: replcursor.Op{Receipt: "r", Delay: 1}},
		{Sub: 3, Kind: replcursor.Extend, Op: replcursor.Op{Receipt: "r", Timeout: 1}},
		{Sub: 3, Kind: CursorReceiveLimited, Op: replcursor.Op{Max: 10, Timeout: time.Second}, Limit: 3},
		{Sub: 3, Kind: CursorDeadDone, Offsets: []int64{0, 7, 1 << 40}},
		{Sub: 3, Kind: CursorSkipTo, To: 1 << 40},
		{Sub: 3, Kind: CursorDeadLetter, Op: replcursor.Op{Receipt: "r"}},
	} {
		f.Add(e.Encode(nil))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 || b[0] != cursorVersion {
			return
		}
		e, err := decodeCursor(b)
		if err != nil {
			if !errors.Is(err, ErrBadEntry) {
				t.Fatalf("refusal %v is not ErrBadEntry", err)
			}
			return
		}
		again, err := decodeCursor(e.Encode(nil))
		if err != nil {
			t.Fatalf("re-encoding of an accepted entry refused: %v", err)
		}
		e.Op.Kind, again.Op.Kind = 0, 0
		if !reflect.DeepEqual(again, e) {
			t.Fatalf("round trip changed the entry:\n%+v\n%+v", e, again)
		}
		// Applying it never panics: a refusal or a stopped group.
		m := NewMachine(1, &fakeLog{})
		_ = m.Apply([]multiraft.Entry{{Index: 1, Term: 1, Data: b}})
	})
}

// FuzzRestoreCursors: no snapshot panics Restore; an accepted one snapshots to bytes that
// restore to the same cursors.
func FuzzRestoreCursors(f *testing.F) {
	m := NewMachine(1, &fakeLog{})
	create := (&CursorEntry{Sub: 4, Kind: CursorCreate, Now: time.Unix(9, 0), Config: CursorConfig{FromEarliest: true}}).Encode(nil)
	if err := m.Apply([]multiraft.Entry{{Index: 1, Term: 1, Data: create}}); err != nil {
		f.Fatal(err)
	}
	snap, err := m.Snapshot()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(snap)
	f.Add([]byte{snapVersionCursors})
	m.cursors[4].dead = map[int64]int{3: 2, 8: 1}
	snap, err = m.Snapshot()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(snap)
	f.Fuzz(func(t *testing.T, b []byte) {
		m := NewMachine(1, &fakeLog{})
		if err := m.Restore(b); err != nil {
			return
		}
		cs := m.Cursors()
		again, err := m.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		m2 := NewMachine(1, &fakeLog{})
		if err := m2.Restore(again); err != nil {
			t.Fatalf("a snapshot of a restored machine refused: %v", err)
		}
		if !equalCursors(cs, m2.Cursors()) {
			t.Fatal("round trip changed the cursors")
		}
	})
}
