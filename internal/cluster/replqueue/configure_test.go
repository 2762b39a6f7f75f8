package replqueue

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/queue"
)

// TestConfigureRetention: a Configure entry changes the queue's retention from its place
// in the log on: a message older than the new retention expires at the next command past
// it, one within it stays; times the cursor refuses change nothing. The times in force
// survive a snapshot (version 3), and a machine restored from an older snapshot, or replaying
// from the start, begins with the times it was created with.
func TestConfigureRetention(t *testing.T) {
	created := queue.Config{Visibility: time.Minute, MaxExtension: time.Hour, Retention: 24 * time.Hour}
	m, _ := NewMachine(1, created)
	run(t, m, Command{Op: OpSend, Now: t0, Body: []byte("old")})
	run(t, m, Command{Op: OpSend, Now: t0.Add(50 * time.Minute), Body: []byte("new")})
	if r := run(t, m, Command{Op: OpConfigure, Now: t0.Add(50 * time.Minute),
		Times: Times{Visibility: time.Minute, MaxExtension: 2 * time.Hour, Retention: time.Hour}}); !errors.Is(r.Err, queue.ErrOutOfRange) {
		t.Fatalf("an extension limit past the retention: %v, want ErrOutOfRange", r.Err)
	}
	if got := m.Config().Retention; got != 24*time.Hour {
		t.Fatalf("retention %v after a refused Configure", got)
	}
	short := Times{Visibility: time.Minute, MaxExtension: 30 * time.Minute, Retention: time.Hour}
	if r := run(t, m, Command{Op: OpConfigure, Now: t0.Add(50 * time.Minute), Times: short}); r.Err != nil {
		t.Fatal(r.Err)
	}
	snap, _ := m.Snapshot()
	// "old" is 70 minutes old at the receive, past the new hour; "new" is 20 minutes old.
	if r := run(t, m, Command{Op: OpReceive, Now: t0.Add(70 * time.Minute), Max: 10}); bodies(r.Deliveries) != "new " {
		t.Fatalf("after the retention went to an hour: %q, want only new", bodies(r.Deliveries))
	}

	restored, _ := NewMachine(1, created)
	if err := restored.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if got := timesOf(restored.Config()); got != short {
		t.Fatalf("times after a restore: %+v, want %+v", got, short)
	}
	if r := run(t, restored, Command{Op: OpReceive, Now: t0.Add(70 * time.Minute), Max: 10}); bodies(r.Deliveries) != "new " {
		t.Fatalf("restored: %q, want only new", bodies(r.Deliveries))
	}
	if err := restored.Restore(nil); err != nil { // a replay from the log's start
		t.Fatal(err)
	}
	if got := restored.Config().Retention; got != 24*time.Hour {
		t.Fatalf("retention after a restore to empty: %v, want the creation's 24h", got)
	}
	old, _ := NewMachine(1, created)
	if err := old.Restore(snapWithoutTimes(t, snap)); err != nil {
		t.Fatalf("a version 2 snapshot: %v", err)
	}
	if got := old.Config().Retention; got != 24*time.Hour {
		t.Fatalf("retention after a version 2 snapshot: %v, want the creation's", got)
	}
}

// snapWithoutTimes turns a version 3 snapshot into the version 2 one it extends: the same
// bytes, without the three durations at the end.
func snapWithoutTimes(t *testing.T, snap []byte) []byte {
	t.Helper()
	m, _ := NewMachine(1, queue.Config{})
	if err := m.Restore(snap); err != nil {
		t.Fatal(err)
	}
	tail := 0
	tm := timesOf(m.Config())
	for _, d := range []time.Duration{tm.Visibility, tm.MaxExtension, tm.Retention} {
		tail += len(binary.AppendVarint(nil, int64(d)))
	}
	out := append([]byte(nil), snap[:len(snap)-tail]...)
	out[0] = 2
	return out
}
