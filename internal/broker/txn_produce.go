package broker

import (
	"errors"
	"fmt"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/storage"
)

// ErrControlBatch: a producer sent a control batch; only the transaction
// coordinator writes markers (Kafka answers INVALID_RECORD).
var ErrControlBatch = errors.New("control batches are written by the transaction coordinator, not by producers")

// admitTransactional checks the transactional batches of a produce before
// they are appended (KIP-890 part 1): each must come from the current
// epoch of a producer whose open transaction holds this partition, else
// INVALID_TXN_STATE or PRODUCER_FENCED and nothing is written. An admitted
// producer's open transaction is registered in the partition (at the high
// watermark of now, at or below where its batch lands) before the append,
// so the last stable offset never passes an open record. The check and
// the registration are one step under the partition's transaction lock,
// which the coordinator's markers also take: a transaction that is
// completing has left Ongoing, so a batch verified is always covered by a
// marker to come.
//
// implicit (produce v12+, KIP-890 part 2) adds the partition to the
// producer's transaction instead of asking that it was added, durably
// before the batch is appended: a registration whose append then fails
// is ended by the producer's abort, as Kafka's is.
//
// Each admitted batch is counted as appending until the caller calls
// release (after its append, whatever came of it): the transaction's
// marker waits for it (writeMarker), so a batch checked just before its
// producer's EndTxn still lands before the marker, never after it,
// outside its transaction.
func (b *Broker) admitTransactional(p *partitionRT, checked storage.Checked, implicit bool) (release func(), err error) {
	var admitted []int64
	release = func() {
		if len(admitted) == 0 {
			return
		}
		p.txn.mu.Lock()
		for _, pid := range admitted {
			if p.txn.appending[pid]--; p.txn.appending[pid] <= 0 {
				delete(p.txn.appending, pid)
			}
		}
		p.txn.cond().Broadcast()
		p.txn.mu.Unlock()
		admitted = nil
	}
	if err := b.admitEach(p, checked, implicit, &admitted); err != nil {
		release()
		return func() {}, err
	}
	return release, nil
}

// admitEach is admitTransactional's check of each batch; admitted gets
// the producer id of each batch counted as appending.
func (b *Broker) admitEach(p *partitionRT, checked storage.Checked, implicit bool, admitted *[]int64) error {
	for i := range checked.Len() {
		h, _ := batch.ParseHeader(checked.Batch(i))
		if h.Control() {
			return fmt.Errorf("batch %d: %w", i, ErrControlBatch)
		}
		if !h.Transactional() {
			continue
		}
		if b.cluster != nil {
			if err := b.admitClustered(p, h, implicit, admitted); err != nil {
				return fmt.Errorf("batch %d: %w", i, err)
			}
			continue
		}
		c, err := b.coordinator()
		if err != nil {
			return err
		}
		if h.ProducerID < 0 {
			return fmt.Errorf("batch %d: %w: a transactional batch without a producer id", i, ErrInvalidTxnState)
		}
		// The check and the note that the batch is on its way are one step under the
		// partition's lock: a marker of this transaction takes that lock only after the
		// decision, which the check would have refused, so it finds the batch counted
		// and waits for its append. The wait for the coordinator's record to be durable
		// is outside the lock: other producers' batches do not queue behind its sync.
		p.txn.mu.Lock()
		tp := TxnPartition{Topic: p.topic, Partition: p.index}
		settle, err := c.CheckProduce(h.ProducerID, h.ProducerEpoch, []TxnPartition{tp}, implicit)
		if err == nil {
			p.txn.admitLocked(h.ProducerID, p.log.HighWatermark(), admitted)
		}
		p.txn.mu.Unlock()
		if werr := settle(); err == nil {
			err = werr
		}
		if err != nil {
			return fmt.Errorf("batch %d: %w", i, err)
		}
	}
	return nil
}

// admitLocked notes pid's transaction open (from hw, if it was not) and one more of its
// batches on its way into the log, which a marker waits for; admitted collects the
// producer, for the caller to release once the batch is appended. Called with tp.mu held.
func (tp *txnPartition) admitLocked(pid, hw int64, admitted *[]int64) {
	tp.noteOpenLocked(pid, hw)
	if tp.appending == nil {
		tp.appending = map[int64]int{}
	}
	tp.appending[pid]++
	*admitted = append(*admitted, pid)
}
