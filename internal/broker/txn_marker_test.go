package broker

import (
	"context"
	"slices"
	"testing"
	"time"
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
