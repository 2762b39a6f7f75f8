package replqueue

import (
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/queue"
)

// TestSnapshotPacedByBacklog: a queue's snapshot is due once the entries applied since
// the last one weigh half its size: not after a few entries on top of a backlog of 2,000
// messages of 1 KiB, and after them once they weigh a megabyte. An empty queue's is due at
// once, as before pacing.
func TestSnapshotPacedByBacklog(t *testing.T) {
	m, err := NewMachine(1, queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if !m.SnapshotDue() {
		t.Fatal("an empty queue's snapshot is not due")
	}
	now := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	index := uint64(0)
	send := func(n int) {
		t.Helper()
		body := make([]byte, 1024)
		for range n {
			index++
			c := Command{Op: OpSend, Origin: 2, Request: index, Now: now, Body: body}
			if err := m.Apply([]multiraft.Entry{{Index: index, Term: 1, Data: c.Encode(nil)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(2000)
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if m.SnapshotDue() {
		t.Fatalf("due right after a snapshot of %d bytes", len(snap))
	}
	if size := m.lastSnap; size < int64(len(snap)) || size > 2*int64(len(snap)) {
		t.Fatalf("snapshot sized %d bytes for %d written", size, len(snap))
	}
	send(900) // ~0.9 MiB of entries: under half of the ~2 MiB snapshot
	if m.SnapshotDue() {
		t.Fatalf("due after 900 sends on a snapshot of %d bytes", len(snap))
	}
	send(200)
	if !m.SnapshotDue() {
		t.Fatalf("not due after 1,100 sends on a snapshot of %d bytes", len(snap))
	}
	// A replica that restores the snapshot paces from it too.
	r, _ := NewMachine(2, queue.Config{})
	if err := r.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if r.SnapshotDue() {
		t.Fatal("due right after restoring a snapshot")
	}
}
