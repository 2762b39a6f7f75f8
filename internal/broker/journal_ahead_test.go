package broker

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/storage"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// TestQueueJournalAheadOfLog: a queue's cursor journal that knows offsets
// its message log lost (the log's tail is gone, the journal's is not) must
// not swallow the sends made afterwards. The log loses its tail two ways:
// its segment file cut back (a power cut under --fsync interval|never, where
// the two files sync independently) and a backup that copied the log
// directory before the journal directory while the broker ran. Every send
// made after the reopen is received, the lost in-flight messages are never
// delivered with someone else's body, and the loss is counted.
func TestQueueJournalAheadOfLog(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(t *testing.T, mem *vfs.MemFS, early *vfs.MemFS, logDir string, keep int64) *vfs.MemFS
	}{
		{"log segment cut back", func(t *testing.T, mem, _ *vfs.MemFS, logDir string, keep int64) *vfs.MemFS {
			f, err := mem.OpenAppend(filepath.Join(logDir, segName0))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := f.Truncate(keep); err != nil {
				t.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			return mem
		}},
		{"log copied before the journal", func(t *testing.T, mem, early *vfs.MemFS, logDir string, _ int64) *vfs.MemFS {
			copyDir(t, early, mem, logDir)
			return mem
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			s, err := e.b.CreateQueue(QueueSettings{Name: "q", VisibilityTimeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			logDir := filepath.Join(queueDir("/data", s), "log")
			mem := e.fs.(*vfs.MemFS)
			e.send("q", names("a", 10)...) // offsets 0..9, the part the log keeps
			keep := fileSize(t, mem, filepath.Join(logDir, segName0))
			early := mem.CrashClone()      // a backup's copy of the log, taken now
			e.send("q", names("b", 10)...) // offsets 10..19: the log loses them
			ds := e.receive("q", 20)
			if len(ds) != 20 {
				t.Fatalf("received %d, want 20", len(ds))
			}
			for _, d := range ds[:17] { // b7, b8, b9 stay in flight
				if err := e.b.Ack(context.Background(), "q", d.Receipt); err != nil {
					t.Fatal(err)
				}
			}
			if err := e.b.Close(); err != nil {
				t.Fatal(err)
			}
			e.b = nil
			e.fs = tc.lose(t, mem, early, logDir, keep)
			e.open()

			sent := names("n", 5)
			e.send("q", sent...)
			var got []string
			for range 3 {
				got = append(got, bodies(e.receive("q", 10))...)
			}
			if !slices.Equal(got, sent) {
				t.Fatalf("received %q after the reopen, want %q", got, sent)
			}
			// The lost in-flight messages come due: nothing of theirs, nor
			// anyone else's body under their offsets, is delivered.
			e.clock.Advance(2 * time.Minute)
			if again := e.receive("q", 10); len(again) != 5 || !slices.Equal(bodies(again), sent) {
				t.Fatalf("after the visibility timeout received %q, want only the redelivered %q", bodies(again), sent)
			}
			if st, _ := e.b.QueueStats("q"); st.RecoveredGap != 3 {
				t.Errorf("RecoveredGap = %d, want 3 (b7..b9, in flight when the log lost them)", st.RecoveredGap)
			}
			// The repair is durable: a clean restart repairs nothing again.
			e.restart()
			if st, _ := e.b.QueueStats("q"); st.RecoveredGap != 0 {
				t.Errorf("RecoveredGap = %d after a clean restart, want 0", st.RecoveredGap)
			}
			e.send("q", "last")
			e.clock.Advance(2 * time.Minute)
			if got := bodies(e.receive("q", 10)); !slices.Contains(got, "last") {
				t.Fatalf("after the restart received %q, want \"last\" among them", got)
			}
		})
	}
}

const segName0 = "00000000000000000000.log"

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

func fileSize(t *testing.T, fsys vfs.FS, name string) int64 {
	t.Helper()
	fi, err := fsys.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// copyDir makes dst's dir what src's is (files only), durably: a backup
// restored from a copy of dir taken at another moment than the rest.
func copyDir(t *testing.T, src, dst vfs.FS, dir string) {
	t.Helper()
	old, err := dst.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range old {
		if err := dst.Remove(filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	ns, err := src.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		in, err := src.Open(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		size, _ := in.Size()
		buf := make([]byte, size)
		if _, err := in.ReadAt(buf, 0); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		in.Close()
		out, err := dst.Create(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := out.Write(buf); err != nil {
			t.Fatal(err)
		}
		if err := out.Sync(); err != nil {
			t.Fatal(err)
		}
		out.Close()
	}
	if err := dst.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
}

// TestSubscriptionJournalAheadOfTopic: the same for a subscription, whose
// cursor journal can outlive the tail of its topic's partition log (a backup
// that copied the partition before the subscription). Records produced
// after the reopen are delivered, and the ones lost in flight are counted.
func TestSubscriptionJournalAheadOfTopic(t *testing.T) {
	e := newEnv(t, nil)
	ts, err := e.b.CreateTopic(TopicSettings{Name: "t", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	e.createSub(SubscriptionSettings{Topic: "t", Name: "s"})
	partDir := filepath.Join(topicDir("/data", ts), "0")
	mem := e.fs.(*vfs.MemFS)
	produce := func(vals []string) {
		for _, v := range vals {
			e.produce("t", kv("", v))
		}
	}
	produce(names("a", 10))
	early := mem.CrashClone()
	produce(names("b", 10))
	ds := e.subReceive("t", "s", 20)
	if len(ds) != 20 {
		t.Fatalf("received %d, want 20", len(ds))
	}
	e.subAck("t", "s", ds[:17]...)
	if err := e.b.Close(); err != nil {
		t.Fatal(err)
	}
	e.b = nil
	copyDir(t, early, mem, partDir)
	e.open()

	sent := names("n", 5)
	produce(sent)
	var got []string
	for range 3 {
		got = append(got, values(e.subReceive("t", "s", 10))...)
	}
	if !slices.Equal(got, sent) {
		t.Fatalf("received %q after the reopen, want %q", got, sent)
	}
	if st, _ := e.b.SubscriptionStats("t", "s"); st.RecoveredGap != 3 {
		t.Errorf("RecoveredGap = %d, want 3", st.RecoveredGap)
	}
}

// TestQueueSnapshotAheadOfLogAfterPowerCut: the power-cut form. Under
// --fsync never the message log is synced only when a segment rolls, but a
// cursor snapshot is always written durably (atomic rename), so a power cut
// keeps a snapshot that acked messages the log lost. Sends after the reboot
// are delivered.
func TestQueueSnapshotAheadOfLogAfterPowerCut(t *testing.T) {
	mem := vfs.NewMem()
	clock := newClock()
	open := func(fsys vfs.FS) *Broker {
		b, err := Open(Options{Dir: "/data", FS: fsys, Now: clock.Now, Logger: quietLogger(), SnapshotEvery: 20,
			HeadroomBytes: testHeadroom, Sync: storage.SyncPolicy{Mode: storage.SyncNever}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := open(mem)
	e := &env{t: t, fs: mem, clock: clock, b: b}
	e.createQueue(QueueSettings{Name: "q"})
	e.send("q", names("a", 30)...)
	for _, d := range e.receive("q", 30) {
		if err := b.Ack(context.Background(), "q", d.Receipt); err != nil {
			t.Fatal(err)
		}
	}
	b.Maintain() // the maintenance pass writes the snapshot
	e.fs = mem.CrashClone()
	go b.Close()
	e.b = open(e.fs)
	defer e.b.Close()

	sent := names("n", 5)
	e.send("q", sent...)
	var got []string
	for range 3 {
		got = append(got, bodies(e.receive("q", 10))...)
	}
	if !slices.Equal(got, sent) {
		t.Fatalf("received %q after the power cut, want %q", got, sent)
	}
}

// TestFIFOQueueJournalAheadOfLog: in a FIFO queue the lost message was the
// head of its group, in flight. The group's messages sent after the reopen
// are not held behind it.
func TestFIFOQueueJournalAheadOfLog(t *testing.T) {
	e := newEnv(t, nil)
	s, err := e.b.CreateQueue(QueueSettings{Name: "q.fifo", FIFO: true, VisibilityTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	logDir := filepath.Join(queueDir("/data", s), "log")
	mem := e.fs.(*vfs.MemFS)
	send := func(vals []string) {
		in := make([]SendInput, len(vals))
		for i, v := range vals {
			in[i] = SendInput{Body: []byte(v), GroupID: "g", DedupID: v}
		}
		if _, err := e.b.Send(context.Background(), "q.fifo", in); err != nil {
			t.Fatal(err)
		}
	}
	send(names("a", 5))
	early := mem.CrashClone()
	send(names("b", 5)) // lost with the log's tail
	// One at a time, as the group allows: a0..a4 and b0..b2 acked, b3 left
	// in flight (b4 behind it is only buffered, so the journal never knew it).
	for i := range 9 {
		ds := e.receive("q.fifo", 10)
		if len(ds) != 1 {
			t.Fatalf("receive %d: got %d messages, want 1", i, len(ds))
		}
		if i < 8 {
			if err := e.b.Ack(context.Background(), "q.fifo", ds[0].Receipt); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := e.b.Close(); err != nil {
		t.Fatal(err)
	}
	e.b = nil
	copyDir(t, early, mem, logDir)
	e.open()

	sent := names("n", 3)
	send(sent)
	var got []string
	for range 4 { // in order, one at a time: each acked before the next comes
		ds := e.receive("q.fifo", 10)
		got = append(got, bodies(ds)...)
		for _, d := range ds {
			if err := e.b.Ack(context.Background(), "q.fifo", d.Receipt); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !slices.Equal(got, sent) {
		t.Fatalf("received %q after the reopen, want %q", got, sent)
	}
	if st, _ := e.b.QueueStats("q.fifo"); st.RecoveredGap != 1 {
		t.Errorf("RecoveredGap = %d, want 1 (b3, in flight)", st.RecoveredGap)
	}
}
