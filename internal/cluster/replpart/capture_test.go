package replpart

import (
	"bytes"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/queue"
)

// TestCaptureSnapshotPersistsInTheEncoding: with a Log that captures its checkpoints, the
// capture names the log as of now and makes nothing durable; the encoding, run after later
// entries, makes at least that durable (a crash then keeps what the checkpoint names) and
// returns the snapshot Snapshot would have returned at the capture. A Log that cannot
// capture is checkpointed by the capture itself.
func TestCaptureSnapshotPersistsInTheEncoding(t *testing.T) {
	l := &fakeLog{}
	m := NewMachine(1, capturingLog{l})
	twin := NewMachine(1, &fakeLog{}) // the same entries, snapshotted at once
	apply := func(i uint64, b string) { t.Helper(); applyBatch(t, i, b, m, twin) }
	apply(2, "a")
	apply(3, "b")
	want, err := twin.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	encode, err := m.CaptureSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if len(l.durable) != 0 {
		t.Fatalf("the capture made %d batches durable: the encoding's work", len(l.durable))
	}
	apply(4, "c")
	got, err := encode()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("encoded after a later entry: %x (%v), want the snapshot at the capture %x", got, err, want)
	}
	l.crash()
	if recs := l.snapshot(); len(recs) < 2 {
		t.Fatalf("after the encoding and a crash the log holds %+v: less than its checkpoint names", recs)
	}
	if err := m.Restore(got); err != nil {
		t.Fatal(err)
	}

	plain := &fakeLog{}
	p := NewMachine(1, plain)
	applyBatch(t, 2, "a", p)
	if _, err := p.CaptureSnapshot(); err != nil || len(plain.durable) != 1 {
		t.Fatalf("a log that cannot capture: %d batches durable after the capture (%v), want 1", len(plain.durable), err)
	}
}

// keepingLog is the capturing fake that also hears which checkpoints were stored.
type keepingLog struct {
	capturingLog
	stored *[]string
}

func (l keepingLog) CheckpointStored(cp []byte) { *l.stored = append(*l.stored, string(cp)) }

// TestCheckpointStoredOnlyOnceItsSnapshotIs: a Log is told its checkpoint is stored when
// the host stores the snapshot holding it (CompactTo), once, and never of a checkpoint
// whose snapshot a Restore overtook.
func TestCheckpointStoredOnlyOnceItsSnapshotIs(t *testing.T) {
	var stored []string
	l := keepingLog{capturingLog{&fakeLog{}}, &stored}
	m := NewMachine(1, l)
	apply := func(i uint64, b string) { t.Helper(); applyBatch(t, i, b, m) }
	apply(2, "a")
	snap, err := m.Snapshot()
	if err != nil || len(stored) != 0 {
		t.Fatalf("taken, not stored: %d checkpoints said stored (%v)", len(stored), err)
	}
	m.CompactTo(2)
	m.CompactTo(2)
	if len(stored) != 1 {
		t.Fatalf("stored once: %d checkpoints said stored, want 1", len(stored))
	}
	apply(3, "b")
	encode, err := m.CaptureSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := encode(); err != nil {
		t.Fatal(err)
	}
	if err := m.Restore(snap); err != nil { // a leader's snapshot overtook the encoded one
		t.Fatal(err)
	}
	m.CompactTo(3)
	if len(stored) != 1 {
		t.Fatalf("a checkpoint a Restore overtook was said stored (%d)", len(stored))
	}
	apply(3, "b")
	encode, _ = m.CaptureSnapshot()
	data, _ := encode()
	m.CompactTo(3)
	if len(stored) != 2 || !bytes.HasSuffix(data, []byte(stored[1])) {
		t.Fatalf("the captured checkpoint was not said stored: %d calls", len(stored))
	}
}

// TestCapturedCursorsAreTheStateAtCapture: the cursors a snapshot captures (records in
// flight, finished ranges, dead letters) encode later, after receives, acks, new dead
// letters and a new subscription, to the snapshot at the capture byte for byte: the
// encoding runs off the Ready loop while applies change the cursors.
func TestCapturedCursorsAreTheStateAtCapture(t *testing.T) {
	qcfg := queue.Config{Visibility: time.Minute}
	cur, err := queue.New(qcfg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	metas := make([]queue.Meta, 20)
	for i := range metas {
		metas[i] = queue.Meta{Offset: int64(i), SentAt: now}
	}
	cur.Offer(now, metas)
	ds, _, err := cur.Receive(now, 8, 0)
	if err != nil || len(ds) != 8 {
		t.Fatalf("receive: %d, %v", len(ds), err)
	}
	if _, err := cur.Ack(now, ds[1].Receipt); err != nil {
		t.Fatal(err)
	}
	m := NewMachine(1, nil)
	m.clock.Set(now.UnixNano())
	m.cursors[5] = &subCursor{cur: cur, cfg: CursorConfig{Queue: qcfg}, dead: map[int64]int{30: 2}}
	captured := m.captureCursors([]byte("cp"))
	want := m.encodeSnapshot([]byte("cp"))

	for _, d := range ds[2:6] {
		if _, err := cur.Ack(now, d.Receipt); err != nil {
			t.Fatal(err)
		}
	}
	if more, _, err := cur.Receive(now, 5, 0); err != nil || len(more) == 0 {
		t.Fatalf("receive after the capture: %d, %v", len(more), err)
	}
	m.cursors[5].dead[31] = 1
	delete(m.cursors[5].dead, 30)
	m.cursors[6] = &subCursor{cur: cur, cfg: CursorConfig{Queue: qcfg}}
	m.clock.Advance(now.Add(time.Second))
	if now := m.encodeSnapshot([]byte("cp")); bytes.Equal(now, want) {
		t.Fatal("the changes after the capture changed nothing in a snapshot: the test checks nothing")
	}
	if got := captured.encode(); !bytes.Equal(got, want) {
		t.Fatalf("encoded after later changes:\n got  %x\n want %x (the snapshot at the capture)", got, want)
	}
}
