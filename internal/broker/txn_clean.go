package broker

import (
	"slices"

	"github.com/sluice-mq/sluice/internal/storage"
)

// The cleaner and transactions (storage/clean_txn.go says what the
// cleaner does). The broker's part: bound each pass by the last stable
// offset (nothing of an open transaction is cleaned, and every
// transactional batch a pass sees belongs to a transaction that is over),
// hand it the aborted index, and, before a pass removes markers, drop
// their aborted-index entries and make txn.snapshot durable without them.
// A snapshot taken while one of those transactions was open, with a
// rebuild scanning on from it and finding no marker, would otherwise keep
// it open for ever (the last stable offset stuck); and an index entry
// whose abort marker is gone would make a read_committed client skip the
// producer's later committed batches in the same fetch.

// cleanBound returns the offset a pass of p may clean up to (the last
// stable offset, and floor when it is not 0) and the transactions it must
// know. A bound of 0 cleans nothing.
func (b *Broker) cleanBound(p *partitionRT, floor int64) (int64, *storage.CleanTxns) {
	below := p.txn.lso(p.log.HighWatermark())
	if floor > 0 {
		below = min(below, floor)
	}
	// Taken after the last stable offset: every transaction with records
	// below it had its marker noted by then.
	var aborted []storage.AbortedTxn
	for _, a := range p.txn.abortedIn(0, below) {
		aborted = append(aborted, storage.AbortedTxn{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset, LastOffset: a.LastOffset})
	}
	return below, &storage.CleanTxns{Aborted: aborted, BeforeDrop: func(ms []storage.TxnMarker) error {
		return b.dropMarkers(p, ms)
	}}
}

// dropMarkers forgets the aborted-index entries of the abort markers the
// cleaner is about to remove, and writes txn.snapshot (it then covers
// every marker removed, with their transactions closed).
func (b *Broker) dropMarkers(p *partitionRT, ms []storage.TxnMarker) error {
	tp := &p.txn
	tp.mu.Lock()
	for tp.inFlight > 0 {
		tp.cond().Wait()
	}
	for _, m := range ms {
		if !m.Commit {
			tp.aborted = slices.DeleteFunc(tp.aborted, func(a AbortedTxn) bool {
				return a.ProducerID == m.ProducerID && a.LastOffset == m.Offset
			})
		}
	}
	tp.changed = true
	tp.mu.Unlock()
	if p.stateFromGroup {
		return nil // the next checkpoint carries it (topicRT.openPartition)
	}
	for {
		if err := tp.maybeSnapshot(p.log, b.opts.FS, p.dir, true); err != nil {
			return err
		}
		tp.mu.Lock()
		// Written (this call or another) since the change, unless a marker
		// in flight made maybeSnapshot wait for a later call.
		done := !tp.changed
		for !done && tp.inFlight > 0 {
			tp.cond().Wait()
		}
		tp.mu.Unlock()
		if done {
			return nil
		}
	}
}
