package broker

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// TestTxnMarkerWaitsForAdmittedBatch: a transactional batch checked
// against its transaction (admitted) but not yet appended when its
// producer's EndTxn arrives lands before the marker, not after it: the
// marker waits for the append. Otherwise the aborted batch would sit past
// its abort marker, outside any transaction, visible to read_committed.
func TestTxnMarkerWaitsForAdmittedBatch(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("t", 1)
	a := e.txnProducer("a")
	if errs, err := e.b.AddPartitionsToTxn("a", a.pid.ID, a.pid.Epoch, []TxnPartition{{Topic: "t", Partition: 0}}); err != nil || errs[0] != nil {
		t.Fatalf("add: %v %v", err, errs)
	}
	_, p, err := e.b.streams.partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	checked, err := p.log.Check(txnBatch(a.pid, 0, "late"))
	if err != nil {
		t.Fatal(err)
	}
	release, err := e.b.admitTransactional(p, checked, false)
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- e.b.EndTxn("a", a.pid.ID, a.pid.Epoch, false) }()
	select {
	case err := <-ended:
		t.Fatalf("EndTxn answered (%v) while an admitted batch was not appended", err)
	case <-time.After(200 * time.Millisecond): // the marker is waiting (it cannot be seen otherwise)
	}
	res, err := e.b.appendBatches(context.Background(), p, checked)
	release()
	if err != nil {
		t.Fatal(err)
	}
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
	st := e.state("t")
	if res.BaseOffsets[0] != 0 || st.HighWatermark != 2 || st.LastStableOffset != 2 {
		t.Fatalf("batch at %d, %+v: want the batch at 0, the marker at 1", res.BaseOffsets[0], st)
	}
	sec, _ := e.b.FetchSection("t", 0, 0, SectionOptions{ReadCommitted: true})
	if want := []AbortedTxn{{a.pid.ID, 0, 1}}; !slices.Equal(sec.Aborted, want) {
		t.Fatalf("aborted %+v, want %+v", sec.Aborted, want)
	}
	if got := e.committedValues("t"); len(got) != 0 {
		t.Fatalf("committed values %v, want none (the batch was aborted)", got)
	}
}

// TestTxnBumpSurvivesCrash: EndTxn v5's epoch bumps are durable in the
// coordinator's log alone (producers.json is not rewritten per
// transaction); after a power cut a new InitProducerId still gets an
// epoch above all of them, and the last one is fenced.
func TestTxnBumpSurvivesCrash(t *testing.T) {
	e := newEnv(t, vfs.NewMem())
	e.createTopic("t", 2)
	a := e.txnProducer("a")
	cur := TxnProducer{ID: a.pid.ID, Epoch: a.pid.Epoch}
	for i := range 3 {
		raws := [][]byte{txnBatch(ProducerID(cur), 0, "v")}
		if err := e.b.AddTxnPartitionsImplicit(cur.ID, cur.Epoch, []TxnPartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.b.ProduceBatchesWith(context.Background(), "t", int32(i%2), raws, BatchOptions{TxnImplicitAdd: true}); err != nil {
			t.Fatal(err)
		}
		next, err := e.b.EndTxnBump("a", cur.ID, cur.Epoch, true)
		if err != nil || next.ID != cur.ID || next.Epoch != cur.Epoch+1 {
			t.Fatalf("EndTxn v5 %d: %+v %v after %+v", i, next, err, cur)
		}
		cur = next
	}
	e.crash()
	p, err := e.b.InitTransactionalProducer("a", time.Minute, TxnProducer{ID: -1, Epoch: -1})
	if err != nil || p.ID != cur.ID || p.Epoch != cur.Epoch+1 {
		t.Fatalf("init after the crash: %+v %v, want id %d epoch %d", p, err, cur.ID, cur.Epoch+1)
	}
	if _, err := e.b.EndTxnBump("a", cur.ID, cur.Epoch, false); !errors.Is(err, ErrTxnFenced) {
		t.Fatalf("the epoch before the init: %v, want fenced", err)
	}
	if got := e.committedValues("t"); len(got) != 2 { // partition 0: transactions 1 and 3
		t.Fatalf("committed on partition 0: %v", got)
	}
}
