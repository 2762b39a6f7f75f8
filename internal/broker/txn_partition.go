package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sort"
	"sync"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/journal"
	"github.com/sluice-mq/sluice/internal/storage"
	"github.com/sluice-mq/sluice/internal/vfs"
	"github.com/sluice-mq/sluice/internal/wire"
)

// AbortedTxn is one aborted transaction in a partition, as a Kafka fetch
// reports it: the producer, the offset of its first record here, and the
// offset of its abort marker.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
}

// txnPartition is a partition's transactions: the first offset of each
// producer's open transaction (the oldest is the last stable offset) and
// the aborted ones (the index a read_committed fetch answers with).
//
// A transactional batch is registered here before it is appended, at
// the high watermark of that moment (at or below its real offset, so the
// LSO is never above an open record); a marker is noted after it is
// appended, the open entry dropped and the aborted entry added in one
// step, so a reader never sees aborted records without the index entry
// that hides them.
type txnPartition struct {
	mu       sync.Mutex
	open     map[int64]int64 // producer id → first offset of its open transaction
	aborted  []AbortedTxn    // by LastOffset
	inFlight int             // markers being appended: no snapshot meanwhile, lso waits
	// appending counts, per producer, transactional batches admitted and
	// not yet appended (admitTransactional): its marker waits for them.
	appending map[int64]int
	// seq is, per producer, the last marker applied: its sequence (a cluster's markers
	// carry one in their coordinator epoch: cluster_txn_apply.go; a marker not after it
	// is stale and ignored), offset and timestamp. Derived from the log's markers, kept
	// in the snapshot and a replicated partition's checkpoint, pruned at trims.
	seq map[int64]lastMarker
	// newestMarker is the newest timestamp of a marker applied (unix ms): the clock
	// pruneMarkersLocked forgets old markers by, the same on every replica.
	newestMarker int64
	// ending is, per producer, the highest sequence of a marker this node (as the
	// partition's leader) was asked to write: no batch of the producer is admitted on a
	// view of the records older than it (cluster_txn_verify.go). Memory only.
	ending  map[int64]int32
	settled *sync.Cond // on mu: inFlight went to 0
	changed bool       // since the last snapshot
	snapAt  int64
}

// lso is the last stable offset for a log ending at hw. While a marker is
// being appended it waits for it (one sync): the high watermark may
// already include the marker that ends the oldest open transaction, and a
// reader told an LSO below it would wait for the log to grow past that
// high watermark, which nothing may do for a long time.
func (tp *txnPartition) lso(hw int64) int64 {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	for tp.inFlight > 0 {
		tp.cond().Wait()
	}
	for _, first := range tp.open {
		hw = min(hw, first)
	}
	return hw
}

// cond returns settled, made on first use. Called with mu held.
func (tp *txnPartition) cond() *sync.Cond {
	if tp.settled == nil {
		tp.settled = sync.NewCond(&tp.mu)
	}
	return tp.settled
}

// hasOpen reports whether producer pid has a transaction open here: its producer state
// is kept however long it is idle (Kafka never expires one with a transaction going on).
func (tp *txnPartition) hasOpen(pid int64) bool {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	_, ok := tp.open[pid]
	return ok
}

func (tp *txnPartition) noteOpenLocked(pid, at int64) {
	if tp.open == nil {
		tp.open = map[int64]int64{}
	}
	if _, ok := tp.open[pid]; !ok {
		tp.open[pid] = at
		tp.changed = true
	}
}

func (tp *txnPartition) noteMarkerLocked(pid int64, commit bool, at int64) {
	first, ok := tp.open[pid]
	if !ok {
		return // a marker written again after a crash, or for no records
	}
	delete(tp.open, pid)
	if !commit {
		tp.aborted = append(tp.aborted, AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: at})
	}
	tp.changed = true
}

// abortedIn lists the aborted transactions with records in [from, to).
func (tp *txnPartition) abortedIn(from, to int64) []AbortedTxn {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	i := sort.Search(len(tp.aborted), func(i int) bool { return tp.aborted[i].LastOffset >= from })
	var out []AbortedTxn
	for _, a := range tp.aborted[i:] {
		if a.FirstOffset < to {
			out = append(out, a)
		}
	}
	return out
}

// expire forgets aborted transactions wholly below the log start, and producers' last
// markers below it that are old enough (pruneMarkersLocked).
func (tp *txnPartition) expire(logStart int64) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.expireLocked(logStart)
}

func (tp *txnPartition) expireLocked(logStart int64) {
	i := sort.Search(len(tp.aborted), func(i int) bool { return tp.aborted[i].LastOffset >= logStart })
	if i > 0 {
		tp.aborted = append(tp.aborted[:0], tp.aborted[i:]...)
		tp.changed = true
	}
	tp.pruneMarkersLocked(logStart)
}

// writeMarker appends producer pid's commit or abort marker, if it has
// an open transaction here (a partition added but never written to needs
// none), and notes it, once the batches of pid admitted here are appended.
func (b *Broker) writeMarker(p *partitionRT, pid int64, epoch int16, commit bool) error {
	tp := &p.txn
	tp.mu.Lock()
	for tp.appending[pid] > 0 { // before inFlight: those appends may ask lso
		tp.cond().Wait()
	}
	if _, ok := tp.open[pid]; !ok {
		tp.mu.Unlock()
		return nil
	}
	tp.inFlight++
	tp.mu.Unlock()
	raw, err := batch.BuildMarker(pid, epoch, commit, 0, b.now().UnixMilli())
	var offs []int64
	if err == nil {
		var checked storage.Checked
		if checked, err = p.log.Check(raw); err == nil {
			offs, err = p.log.AppendChecked(context.Background(), LeaderEpoch, checked)
		}
	}
	tp.mu.Lock()
	tp.inFlight--
	if err == nil {
		tp.noteMarkerLocked(pid, commit, offs[0])
	}
	if tp.inFlight == 0 {
		tp.cond().Broadcast()
	}
	tp.mu.Unlock()
	if err != nil {
		return b.disk.Note(mapStorageErr(err))
	}
	p.owner.notifySubs()
	return nil
}

// The transactions of a partition survive restarts as a snapshot
// (txn.snapshot, framed as journal.FrameSnapshot: the offset it covers
// and a CRC) written at close and by maintenance, plus a scan of the log
// after it at open. Body: varint count of open transactions, each varint
// producer id and first offset; varint count of aborted ones, each
// producer id, first and last offset; then, only if any, varint count of
// producers' last marker sequences, each producer id and sequence. Without a snapshot the whole log is
// scanned (a partition written before transactions existed: once). A replicated partition
// writes none: its group's checkpoints carry the state (partitionRT.stateFromGroup).
const (
	txnSnapshotFile = "txn.snapshot"
	// txnSnapshotEvery: maintenance writes a snapshot when this many
	// offsets were appended since the last, so the scan after a crash is
	// bounded even on a partition without transactions.
	txnSnapshotEvery = 1 << 16
)

// rebuild restores the snapshot and scans the log after it.
func (tp *txnPartition) rebuild(log *storage.Log, fsys vfs.FS, dir string, logger *slog.Logger) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.open, tp.aborted, tp.seq, tp.newestMarker, tp.changed = nil, nil, nil, 0, false
	start, hw := log.LogStartOffset(), log.HighWatermark()
	from := start
	if at, err := tp.loadSnapshotLocked(fsys, dir, hw); err == nil {
		from = max(at, start)
	} else if !errors.Is(err, fs.ErrNotExist) {
		logger.Warn("transaction snapshot ignored: scanning the whole log", "err", err)
		tp.open, tp.aborted, tp.seq, tp.newestMarker = nil, nil, nil, 0
	}
	tp.scanLocked(log, from, logger)
	tp.expireLocked(start) // a snapshot written before a trim the log holds
	tp.snapAt = hw
	if from != hw {
		tp.changed = true
	}
}

func (tp *txnPartition) loadSnapshotLocked(fsys vfs.FS, dir string, hw int64) (int64, error) {
	at, body, err := journal.ReadSnapshotUpTo(fsys, filepath.Join(dir, txnSnapshotFile), hw)
	if err != nil {
		return 0, err
	}
	return at, tp.decodeLocked(body, at, false)
}

// decodeLocked reads what encodeLocked wrote into the (empty) state, for a log at offset
// at (the offset markers of a snapshot from before markers had offsets are taken to be at);
// whole: nothing may follow (a checkpoint's), rather than what a newer build may append to
// the file.
func (tp *txnPartition) decodeLocked(body []byte, at int64, whole bool) error {
	d := wire.Decoder{B: body, Bad: errCorruptTxnSnapshot}
	for n := d.Varint(); n > 0 && d.Err == nil; n-- {
		tp.noteOpenLocked(d.Varint(), d.Varint())
	}
	for n := d.Varint(); n > 0 && d.Err == nil; n-- {
		tp.aborted = append(tp.aborted, AbortedTxn{ProducerID: d.Varint(), FirstOffset: d.Varint(), LastOffset: d.Varint()})
	}
	if len(d.B) > 0 { // absent from the snapshots of builds before clusters had markers
		for n := d.Varint(); n > 0 && d.Err == nil; n-- {
			tp.noteSeqLocked(d.Varint(), lastMarker{seq: int32(d.Varint()), at: at})
		}
	}
	if len(d.B) > 0 { // absent before markers were pruned
		tp.newestMarker = d.Varint()
		for n := d.Varint(); n > 0 && d.Err == nil; n-- {
			pid, off, ts := d.Varint(), d.Varint(), d.Varint()
			if m, ok := tp.seq[pid]; ok {
				m.at, m.ts = off, ts
				tp.seq[pid] = m
			}
		}
	}
	if whole && d.Err == nil && len(d.B) > 0 {
		d.Fail("%d bytes after the transactions", len(d.B))
	}
	return d.Err
}

// scanLocked notes the transactional batches and markers from offset from.
// Best effort, like the producer state's scan: damage stops it.
func (tp *txnPartition) scanLocked(log *storage.Log, from int64, logger *slog.Logger) {
	for pos := from; pos < log.HighWatermark(); {
		data, err := log.Read(pos, 1<<20)
		if err != nil || len(data) == 0 {
			if err != nil {
				logger.Warn("transaction state rebuild stopped", "offset", pos, "err", err)
			}
			return
		}
		for len(data) > 0 {
			h, err := batch.ParseHeader(data)
			if err != nil || h.Size() > int64(len(data)) {
				return
			}
			raw := data[:h.Size()]
			if h.Transactional() && h.NextOffset() > from {
				if !h.Control() {
					tp.noteOpenLocked(h.ProducerID, h.BaseOffset)
				} else if commit, seq, err := batch.ParseMarkerEpoch(raw); err == nil {
					tp.noteMarkerLocked(h.ProducerID, commit, h.BaseOffset)
					tp.noteSeqLocked(h.ProducerID, lastMarker{seq: seq, at: h.BaseOffset, ts: h.MaxTimestamp})
				}
			}
			data = data[h.Size():]
			pos = h.NextOffset()
		}
	}
}

// maybeSnapshot writes the snapshot if anything changed or the log grew
// txnSnapshotEvery offsets since the last one (always at close, force).
func (tp *txnPartition) maybeSnapshot(log *storage.Log, fsys vfs.FS, dir string, force bool) error {
	tp.mu.Lock()
	hw := log.HighWatermark()
	if tp.inFlight > 0 || hw == tp.snapAt && !tp.changed || (!force && !tp.changed && hw-tp.snapAt < txnSnapshotEvery) {
		tp.mu.Unlock()
		return nil
	}
	// Every transactional batch below hw is registered (before its
	// append) and no marker is in flight, so the state covers hw.
	body := tp.encodeLocked(nil)
	prevAt, prevChanged := tp.snapAt, tp.changed
	tp.snapAt, tp.changed = hw, false
	tp.mu.Unlock()
	if err := vfs.WriteFileAtomic(fsys, dir, txnSnapshotFile, journal.FrameSnapshot(hw, body)); err != nil {
		tp.mu.Lock()
		tp.snapAt, tp.changed = prevAt, prevChanged || tp.changed
		tp.mu.Unlock()
		return err
	}
	return nil
}

// encodeLocked appends the open transactions, the aborted ones and the producers' last
// markers (the body of txn.snapshot and of a replicated partition's checkpoint):
//
//	varint count, (pid, first offset)...; varint count, (pid, first, last offset)...;
//	then, if any marker was applied: varint count, (pid, sequence)...;
//	varint newest marker timestamp, varint count, (pid, offset, timestamp)...
func (tp *txnPartition) encodeLocked(body []byte) []byte {
	body = binary.AppendVarint(body, int64(len(tp.open)))
	for pid, first := range tp.open {
		body = binary.AppendVarint(binary.AppendVarint(body, pid), first)
	}
	body = binary.AppendVarint(body, int64(len(tp.aborted)))
	for _, a := range tp.aborted {
		body = binary.AppendVarint(binary.AppendVarint(binary.AppendVarint(body, a.ProducerID), a.FirstOffset), a.LastOffset)
	}
	if len(tp.seq) == 0 && tp.newestMarker == 0 {
		return body // as builds before markers had sequences read it
	}
	body = binary.AppendVarint(body, int64(len(tp.seq)))
	for pid, m := range tp.seq {
		body = binary.AppendVarint(binary.AppendVarint(body, pid), int64(m.seq))
	}
	// Then where and when each was written (builds before pruning stop reading here).
	body = binary.AppendVarint(body, tp.newestMarker)
	body = binary.AppendVarint(body, int64(len(tp.seq)))
	for pid, m := range tp.seq {
		body = binary.AppendVarint(binary.AppendVarint(binary.AppendVarint(body, pid), m.at), m.ts)
	}
	return body
}

// errCorruptTxnSnapshot is what a transaction snapshot that does not decode is.
var errCorruptTxnSnapshot = errors.New("corrupt transaction snapshot")
