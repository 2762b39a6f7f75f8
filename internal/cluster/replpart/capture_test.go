package replpart

import (
	"bytes"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
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
	apply := func(i uint64, b string) {
		t.Helper()
		e := (&Entry{Origin: 1, Request: i, Batches: [][]byte{[]byte(b)}}).Encode(nil)
		for _, mm := range []*Machine{m, twin} {
			if err := mm.Apply([]multiraft.Entry{{Index: i, Term: 1, Data: e}}); err != nil {
				t.Fatal(err)
			}
		}
	}
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
	e := (&Entry{Origin: 1, Request: 2, Batches: [][]byte{[]byte("a")}}).Encode(nil)
	if err := p.Apply([]multiraft.Entry{{Index: 2, Term: 1, Data: e}}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.CaptureSnapshot(); err != nil || len(plain.durable) != 1 {
		t.Fatalf("a log that cannot capture: %d batches durable after the capture (%v), want 1", len(plain.durable), err)
	}
}
