package txn

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"
)

// memStore is a Store keeping encoded records, as the cluster's metadata group does.
// fail refuses a Put at once (a proposal dropped); waitFail accepts it and fails its
// wait (a commit whose outcome is unknown), keeping the record (it may well commit).
type memStore struct {
	recs     map[string][]byte
	fail     error
	waitFail error
}

func (s *memStore) Put(t *Txn) (func() error, error) {
	if s.fail != nil {
		return nil, s.fail
	}
	s.recs[t.ID] = EncodeTxn(t)
	err := s.waitFail
	return func() error { return err }, nil
}

func (s *memStore) Remove(id string) error {
	if s.fail != nil {
		return s.fail
	}
	delete(s.recs, id)
	return nil
}

func (s *memStore) initial(t *testing.T) []*Txn {
	var out []*Txn
	for _, id := range slices.Sorted(maps.Keys(s.recs)) {
		tx, err := DecodeTxn(s.recs[id])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tx)
	}
	return out
}

// TestStoreReplacesTheLog: with a Store, every change goes to it (a failed Put is not
// shown), and a coordinator opened from its records (another controller) holds the same
// transactions and finishes the one left prepared, with the same decision.
func TestStoreReplacesTheLog(t *testing.T) {
	fx, ck := &fakeEffects{}, &clock{t: time.Unix(1000, 0)}
	st := &memStore{recs: map[string][]byte{}}
	c, err := Open(Config{Store: st, Now: ck.now, Effects: fx, MaxTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.InitProducerID("etl", 10*time.Second, noProducer)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddPartitions("etl", p.ID, p.Epoch, []Partition{tp0, tp1}); err != nil {
		t.Fatal(err)
	}
	st.fail = errors.New("not the leader")
	if err := c.AddGroup("etl", p.ID, p.Epoch, "g"); err == nil {
		t.Fatal("a change its store refused was accepted")
	}
	if got, _ := c.Describe([]string{"etl"}); len(got[0].Groups) != 0 {
		t.Fatalf("a change its store refused is shown: %+v", got[0])
	}
	st.fail = nil
	// A change proposed but not known to be committed is not answered as done, and a
	// request that sees it waits for it too.
	st.waitFail = errors.New("outcome unknown")
	if err := c.AddGroup("etl", p.ID, p.Epoch, "g"); err == nil {
		t.Fatal("a change whose commit failed was answered as done")
	}
	st.waitFail = nil
	if err := c.AddGroup("etl", p.ID, p.Epoch, "g"); err == nil {
		t.Fatal("a request that saw a change whose commit failed was answered as done")
	}
	fx.fail = errors.New("partition leader away")
	if err := c.EndTxn("etl", p.ID, p.Epoch, true); err != nil {
		t.Fatal(err)
	}
	c.Close()

	fx.fail = nil
	c2, err := Open(Config{Store: st, Initial: st.initial(t), Now: ck.now, Effects: fx, MaxTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got, _ := c2.Describe([]string{"etl"}); got[0].State != PrepareCommit || got[0].ProducerID != p.ID {
		t.Fatalf("the next coordinator holds %+v", got[0])
	}
	if n := c2.Tick(); n != 1 || len(fx.markers) != 1 || !fx.markers[0].commit || len(fx.markers[0].parts) != 2 {
		t.Fatalf("tick finished %d, markers %+v", n, fx.markers)
	}
	tx, err := DecodeTxn(st.recs["etl"])
	if err != nil || tx.State != CompleteCommit || tx.Seq != 1 {
		t.Fatalf("stored after the tick: %+v %v", tx, err)
	}
	// Each decision counts in Seq, which the markers carry; a timeout abort too.
	if err := c2.AddPartitions("etl", p.ID, p.Epoch, []Partition{tp0}); err != nil {
		t.Fatal(err)
	}
	if err := c2.EndTxn("etl", p.ID, p.Epoch, false); err != nil {
		t.Fatal(err)
	}
	if err := c2.AddPartitions("etl", p.ID, p.Epoch, []Partition{tp0}); err != nil {
		t.Fatal(err)
	}
	ck.advance(time.Minute)
	c2.Tick()
	if got, _ := c2.Describe([]string{"etl"}); got[0].Seq != 3 || got[0].State != CompleteAbort {
		t.Fatalf("after an abort and a timeout abort: %+v", got[0])
	}
	if tx, err := DecodeTxn(st.recs["etl"]); err != nil || tx.Seq != 3 {
		t.Fatalf("stored: %+v %v", tx, err)
	}
	ck.advance(DefaultIDExpiration + time.Hour)
	c2.Tick()
	if _, ok := st.recs["etl"]; ok {
		t.Fatal("an expired id stays in the store")
	}
}

// TestNoSeqWithoutStore: a single node's coordinator counts no decisions, so its log keeps
// the record versions older binaries read.
func TestNoSeqWithoutStore(t *testing.T) {
	fx, ck := &fakeEffects{}, &clock{t: time.Unix(1000, 0)}
	c := open(t, newMem(t), fx, ck)
	p, err := c.InitProducerID("etl", 10*time.Second, noProducer)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddPartitions("etl", p.ID, p.Epoch, []Partition{tp0}); err != nil {
		t.Fatal(err)
	}
	if err := c.EndTxn("etl", p.ID, p.Epoch, true); err != nil {
		t.Fatal(err)
	}
	got, _ := c.Describe([]string{"etl"})
	if got[0].Seq != 0 || EncodeTxn(&got[0])[0] != 1 {
		t.Fatalf("single node: seq %d, record version %d", got[0].Seq, EncodeTxn(&got[0])[0])
	}
}
