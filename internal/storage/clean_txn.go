package storage

import (
	"sort"

	"github.com/sluice-mq/sluice/internal/batch"
)

// The cleaner and transactions, as Kafka's log cleaner handles them.
//
// The log does not know its transactions; the broker does (its aborted
// index and last stable offset) and passes them in CleanOptions.Txns,
// with Below at or under the last stable offset, so every transactional
// batch a pass sees belongs to a transaction that is over. Then:
//
//   - a record of an aborted transaction (one the aborted list covers:
//     same producer, at or after the transaction's first offset, before
//     its abort marker — the test a read_committed client applies) is
//     never mapped and is removed; read_uncommitted consumers stop seeing
//     it too, as in Kafka;
//   - committed transactional records are mapped and filtered as any;
//   - a producer's last batch is kept, emptied, whether its transaction
//     committed or aborted, so the sequence survives a rebuild of the
//     producer state from the log;
//   - a commit or abort marker is kept as long as any batch of its
//     transaction (the producer's batches since its previous marker) is
//     kept, so a rebuild of the transaction state from the log never
//     finds a transactional batch without its end. Once none is left the
//     pass sets the marker's delete horizon (now + DeleteRetention) and a
//     later pass after the horizon removes it. The walk goes from the log
//     start in offset order, and runs are swapped in that order, so a
//     marker never goes before the batches its decision counted.
//   - Before a run that removes markers is swapped in, Txns.BeforeDrop
//     hears of them: the broker drops their aborted-index entries and
//     makes its transaction snapshot durable first, so neither a fetch
//     nor a restart finds an index entry or an open transaction whose
//     marker is gone.
//
// Without Txns (nil), transactional batches and markers are kept as they
// are and never mapped: a log whose transactions nobody can tell.

// AbortedTxn is one aborted transaction of a log: the producer, an offset
// at or below its first record and the offset of its abort marker.
type AbortedTxn struct {
	ProducerID, FirstOffset, LastOffset int64
}

// TxnMarker is a transaction marker a pass removes.
type TxnMarker struct {
	ProducerID, Offset int64
	Commit             bool
}

// CleanTxns is what a pass must know of the log's transactions.
type CleanTxns struct {
	// Aborted lists the aborted transactions with records below Below.
	Aborted []AbortedTxn
	// BeforeDrop, if set, is called before a run that removes markers is
	// swapped in; an error ends the pass with the run not swapped.
	BeforeDrop func([]TxnMarker) error
}

// txnWalk is a pass's view of the transactions as it walks the log.
type txnWalk struct {
	aborted map[int64][]AbortedTxn // by producer, by LastOffset
	// kept: producers with a batch kept since their last marker.
	kept map[int64]bool
	drop []TxnMarker // markers the current run removes
	hook func([]TxnMarker) error
}

func newTxnWalk(t *CleanTxns) *txnWalk {
	if t == nil {
		return nil
	}
	w := &txnWalk{aborted: map[int64][]AbortedTxn{}, kept: map[int64]bool{}, hook: t.BeforeDrop}
	for _, a := range t.Aborted {
		w.aborted[a.ProducerID] = append(w.aborted[a.ProducerID], a)
	}
	for _, as := range w.aborted {
		sort.Slice(as, func(i, j int) bool { return as[i].LastOffset < as[j].LastOffset })
	}
	return w
}

// isAborted reports whether the transactional batch h belongs to an
// aborted transaction.
func (w *txnWalk) isAborted(h batch.Header) bool {
	as := w.aborted[h.ProducerID]
	i := sort.Search(len(as), func(i int) bool { return as[i].LastOffset > h.BaseOffset })
	return i < len(as) && as[i].FirstOffset <= h.LastOffset()
}

// filterMarker decides a marker's fate: kept as it is while a batch of its
// transaction is kept; else given a delete horizon, or removed once that
// is past. Kept markers with a horizon report it in f.horizon.
func (p *cleanPass) filterMarker(b []byte, h batch.Header) ([]byte, filtered) {
	var f filtered
	commit, err := batch.ParseMarker(b)
	if err != nil {
		return b, f // not a marker this cleaner knows: kept
	}
	w := p.txns
	if w.kept[h.ProducerID] {
		delete(w.kept, h.ProducerID)
		return b, f
	}
	if hz, ok := h.DeleteHorizon(); ok {
		if hz <= p.now {
			w.drop = append(w.drop, TxnMarker{ProducerID: h.ProducerID, Offset: h.BaseOffset, Commit: commit})
			f.markersRemoved++
			return nil, f
		}
		f.horizon = hz
		return b, f
	}
	hz := max(p.now+p.o.DeleteRetention.Milliseconds(), 1)
	nb, err := batch.WithDeleteHorizon(b, hz)
	if err != nil {
		return b, f
	}
	f.horizon, f.rewritten = hz, true
	return nb, f
}

// beforeSwap tells the broker of the markers the run removes.
func (p *cleanPass) beforeSwap() error {
	if p.txns == nil || len(p.txns.drop) == 0 || p.txns.hook == nil {
		return nil
	}
	return p.txns.hook(p.txns.drop)
}
