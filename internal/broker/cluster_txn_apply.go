package broker

import (
	"context"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/cluster/replpart"
	"github.com/sluice-mq/sluice/internal/storage"
)

// Transactions in a replicated partition, on every replica (docs/cluster.md,
// "Transactions"): apply registers each transactional batch as its producer's open
// transaction before appending it, and applies markers, so each replica derives its open
// and aborted transactions (the last stable offset, the aborted index) from the
// replicated log alone, and a new leader serves read_committed readers as the old one did.

// applyMarker appends one transaction marker and notes it: the producer's open
// transaction here ends (aborted ones are indexed).
func (r *replicaLog) applyMarker(epoch int32, raw []byte, one storage.Checked, out *replpart.BatchResult) error {
	p := r.p
	h, _ := batch.ParseHeader(raw)
	commit, seq, err := batch.ParseMarkerEpoch(raw)
	if err != nil {
		out.Err = err // the same bytes everywhere: refused alike
		return nil
	}
	tp := &p.txn
	tp.mu.Lock()
	if last, ok := tp.seq[h.ProducerID]; ok && !seqAfter(seq, last.seq) {
		// Stale: the marker of a transaction whose marker this replica applied (or of an
		// older one), proposed again on an old view. Applying it could end the
		// producer's next transaction. Not appended, on every replica alike.
		tp.mu.Unlock()
		out.Base, out.Duplicate = -1, true
		return nil
	}
	tp.inFlight++
	tp.mu.Unlock()
	offs, err := p.log.AppendChecked(context.Background(), epoch, one)
	tp.mu.Lock()
	tp.inFlight--
	if err == nil {
		tp.keepLocked(&r.txnUndo, h.ProducerID)
		tp.noteMarkerLocked(h.ProducerID, commit, offs[0])
		tp.noteSeqLocked(h.ProducerID, lastMarker{seq: seq, at: offs[0], ts: h.MaxTimestamp})
	}
	if tp.inFlight == 0 {
		tp.cond().Broadcast()
	}
	tp.mu.Unlock()
	if err != nil {
		return err
	}
	out.Base = offs[0]
	return nil
}

// seqAfter reports whether marker sequence a comes after b. Sequences count a producer's
// transactions (txn.Txn.Seq) and wrap: serial arithmetic, as TCP's, holds while the two
// are less than 2^31 transactions apart, and a stale marker is at most a few behind (a
// deposed controller's or a delayed request's, seconds old).
func seqAfter(a, b int32) bool { return a-b > 0 }

// lastMarker is a producer's last marker applied in a partition: its sequence (what a
// marker must come after), its offset and its timestamp (the leader's clock when the
// coordinator had it written: replicated data, the same on every replica), which say when
// it may be forgotten (pruneMarkersLocked).
type lastMarker struct {
	seq int32
	at  int64 // offset
	ts  int64 // unix ms
}

// noteSeqLocked records m as pid's last marker, if its sequence is after the one recorded.
func (tp *txnPartition) noteSeqLocked(pid int64, m lastMarker) {
	tp.newestMarker = max(tp.newestMarker, m.ts)
	if last, ok := tp.seq[pid]; ok && !seqAfter(m.seq, last.seq) {
		return
	}
	if tp.seq == nil {
		tp.seq = map[int64]lastMarker{}
	}
	tp.seq[pid] = m
	tp.changed = true
}

// markerMemory is how long a producer's last marker is remembered after a trim passed it,
// counted in marker time (the newest marker's timestamp applied here): a marker repeated
// after its transaction ended comes seconds later (a retry, a deposed controller's request,
// bounded by markerTimeout), never an hour.
const markerMemory = time.Hour

// pruneMarkersLocked forgets the last markers below the log start that are more than
// markerMemory older than the newest marker applied here. A trim applies it on every
// replica at the same entry with the same state, so they forget alike; without it every
// transactional producer that ever wrote here would be remembered, in memory and in every
// checkpoint (a producer whose transactional id embeds an instance id makes a new one at
// each deployment).
func (tp *txnPartition) pruneMarkersLocked(logStart int64) {
	horizon := tp.newestMarker - markerMemory.Milliseconds()
	for pid, m := range tp.seq {
		if m.at < logStart && m.ts < horizon {
			delete(tp.seq, pid)
			tp.changed = true
		}
	}
}

// forgetMarkers forgets the last markers of producers a forget entry just forgot that are
// more than markerMemory older than the newest marker applied here: pruneMarkersLocked's
// rule of time, for a partition no trim passes (no retention, a compacted topic), whose
// every transactional producer was remembered for good. The state decides (markers'
// timestamps are replicated bytes), so every replica forgets alike. A marker repeated
// after that is appended, as Kafka appends every marker.
func (tp *txnPartition) forgetMarkers(pids []int64) {
	if len(pids) == 0 {
		return
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	horizon := tp.newestMarker - markerMemory.Milliseconds()
	for _, pid := range pids {
		if m, ok := tp.seq[pid]; ok && m.ts < horizon {
			delete(tp.seq, pid)
			tp.changed = true
		}
	}
}

// txnUndo remembers what an entry's apply changed in a partition's transactions — each
// producer's open transaction and last marker sequence as they were, and how many aborted
// transactions were indexed — so that replicaLog.cutBack can take it back when the disk
// had no room for the whole entry (the producers' side: producer.Undo).
type txnUndo struct {
	active  bool // something was kept since the last reset
	aborted int
	newest  int64 // txnPartition.newestMarker
	saved   []txnSaved
}

type txnSaved struct {
	pid     int64
	open    int64
	hadOpen bool
	seq     lastMarker
	hadSeq  bool
}

func (u *txnUndo) reset() {
	u.active, u.saved = false, u.saved[:0]
}

// keepLocked remembers pid's transaction state, once per reset, before apply changes it.
// Called with tp.mu held.
func (tp *txnPartition) keepLocked(u *txnUndo, pid int64) {
	if !u.active {
		u.active, u.aborted, u.newest = true, len(tp.aborted), tp.newestMarker
	}
	for _, s := range u.saved {
		if s.pid == pid {
			return
		}
	}
	s := txnSaved{pid: pid}
	s.open, s.hadOpen = tp.open[pid]
	s.seq, s.hadSeq = tp.seq[pid]
	u.saved = append(u.saved, s)
}

// undo puts back what u kept, and resets it.
func (tp *txnPartition) undo(u *txnUndo) {
	if !u.active {
		return
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	for _, s := range u.saved {
		if s.hadOpen {
			tp.open[s.pid] = s.open // kept from a map that held it, which stays
		} else {
			delete(tp.open, s.pid)
		}
		if s.hadSeq {
			tp.seq[s.pid] = s.seq // likewise
		} else {
			delete(tp.seq, s.pid)
		}
	}
	if u.aborted <= len(tp.aborted) {
		tp.aborted = tp.aborted[:u.aborted]
	}
	tp.newestMarker = u.newest
	tp.changed = true
	u.reset()
}

// noteOpenKept is noteOpen for apply, which keeps what it changes in u.
func (tp *txnPartition) noteOpenKept(u *txnUndo, pid, at int64) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if _, ok := tp.open[pid]; !ok {
		tp.keepLocked(u, pid)
	}
	tp.noteOpenLocked(pid, at)
}
