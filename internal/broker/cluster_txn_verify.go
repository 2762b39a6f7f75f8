package broker

import (
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/txn"
)

// Produce verification in a cluster (KIP-890 part 1): the partition's leader checks a
// transactional batch against its own copy of the coordinator's records (the catalog's
// Txns): the producer's epoch is its transactional id's, its transaction is Ongoing with
// this partition added, and the record is not older than the last marker of the producer
// this leader applied or was asked to write (its transaction ended: a view older than that
// would let a late batch land after the marker, open for ever). The copy may lag the
// controller by a moment (the producer's AddPartitionsToTxn was answered once committed,
// perhaps before this node applied it): a batch that fails is checked again at every
// catalog change for up to verifyWait before it is refused.

// verifyWait bounds how long a transactional batch waits for this node's copy of the
// records to show its transaction.
const verifyWait = 2 * time.Second

// txnView is a decoded copy of the catalog's records, by producer id.
type txnView struct {
	st    *meta.State
	byID  map[string]txnViewEntry
	byPID map[int64]txnViewEntry
}

type txnViewEntry struct {
	index uint64
	t     *txn.Txn
}

// viewOf decodes st's records, reusing those of the previous view that did not change.
func (ct *clusterTxn) viewOf(st *meta.State) *txnView {
	ct.vmu.Lock()
	defer ct.vmu.Unlock()
	prev := ct.view
	if prev != nil && prev.st == st {
		return prev
	}
	v := &txnView{st: st, byID: make(map[string]txnViewEntry, len(st.Txns)), byPID: make(map[int64]txnViewEntry, len(st.Txns))}
	for id, r := range st.Txns {
		e, ok := txnViewEntry{}, false
		if prev != nil {
			e, ok = prev.byID[id]
			ok = ok && e.index == r.Index
		}
		if !ok {
			t, err := txn.DecodeTxn(r.Record)
			if err != nil {
				continue // refused below as unknown
			}
			e = txnViewEntry{index: r.Index, t: t}
		}
		v.byID[id] = e
		v.byPID[e.t.ProducerID] = e
	}
	ct.view = v
	return v
}

// admitClustered is admitEach's check of one transactional batch in a cluster: verified
// against this node's records, then registered open and counted appending, as on a
// single node, under the partition's transaction lock.
func (b *Broker) admitClustered(p *partitionRT, h batch.Header, implicit bool, admitted *[]int64) error {
	if implicit {
		return fmt.Errorf("%w: produce v12+ adds partitions through the coordinator", ErrTxnVersionInCluster)
	}
	ct := b.cluster.txn
	deadline := time.Now().Add(verifyWait)
	for {
		changed := ct.sm.Changed()
		v := ct.viewOf(ct.sm.State())
		p.txn.mu.Lock()
		err, final := verifyInView(v, p, h)
		if err == nil {
			p.txn.admitLocked(h.ProducerID, p.log.HighWatermark(), admitted)
		}
		p.txn.mu.Unlock()
		left := time.Until(deadline)
		if err == nil || final || left <= 0 {
			return err
		}
		select {
		case <-changed:
		case <-time.After(left):
		}
	}
}

// verifyInView checks one batch against a view; final: no newer view can admit it.
// Called with p.txn.mu held.
func verifyInView(v *txnView, p *partitionRT, h batch.Header) (err error, final bool) {
	e, ok := v.byPID[h.ProducerID]
	if !ok {
		return fmt.Errorf("%w: producer %d has no transactional id", ErrInvalidPIDMapping, h.ProducerID), false
	}
	t := e.t
	last, known := p.txn.seq[h.ProducerID]
	floor := last.seq
	if end, ok := p.txn.ending[h.ProducerID]; ok && (!known || seqAfter(end, floor)) {
		floor, known = end, true
	}
	tp := TxnPartition{Topic: p.topic, Partition: p.index}
	switch {
	case h.ProducerEpoch < t.Epoch:
		return fmt.Errorf("%w: %s is at epoch %d, the batch has %d", ErrTxnFenced, t.ID, t.Epoch, h.ProducerEpoch), true
	case h.ProducerEpoch > t.Epoch:
		return fmt.Errorf("%w: %s is at epoch %d here, the batch has %d", ErrInvalidTxnState, t.ID, t.Epoch, h.ProducerEpoch), false
	case known && seqAfter(floor, int32(t.Seq)):
		// The record is of a transaction before the one whose marker this partition has
		// (a transaction's record holds the Seq of the last decision: its own markers
		// will carry the next).
		return fmt.Errorf("%w: the transaction of %s ended here (marker %d); this node's record is of %d", ErrInvalidTxnState, t.ID, floor, t.Seq), false
	case t.State != txn.Ongoing || !t.HasPartition(tp):
		return fmt.Errorf("%w: %s/%d was not added to the transaction of %s (%v)", ErrInvalidTxnState, tp.Topic, tp.Partition, t.ID, t.State), false
	}
	return nil, false
}
