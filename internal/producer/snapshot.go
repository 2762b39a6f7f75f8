package producer

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"log/slog"
	"path/filepath"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/journal"
	"github.com/sluice-mq/sluice/internal/storage"
	"github.com/sluice-mq/sluice/internal/vfs"
	"github.com/sluice-mq/sluice/internal/wire"
)

// Producer state survives restarts as Kafka's does: a snapshot of every
// producer's last batches, written to the partition directory at close and
// every producerSnapshotEvery offsets (from Maintain), plus a scan of the
// batch headers after it at open. The scan after a snapshot is complete, so
// retries are recognised however fast the partition grows; without a usable
// snapshot only the last ScanOffsets offsets are scanned.
//
// File producers.snapshot: offset covered (8 bytes), CRC-32C of the rest (4
// bytes), varint producer count, then per producer: varint id, varint
// epoch, uvarint batch count, and per batch varint first and last sequence
// and base offset.
const (
	producerSnapshotFile  = "producers.snapshot"
	producerSnapshotEvery = 4096
	// producerMaxScan bounds the scan after an old snapshot (a crash long
	// after the last one): past it, state older than the window is lost.
	producerMaxScan = 1 << 20
)

// Reset forgets every producer: a replica whose log was cut back (a Raft group restoring
// a checkpoint) rebuilds from what remains.
func (ps *State) Reset() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.m, ps.changed, ps.snapAt, ps.gen = nil, 0, 0, 0
}

// Rebuild restores the snapshot and scans the log after it.
func (ps *State) Rebuild(log *storage.Log, fsys vfs.FS, dir string, logger *slog.Logger) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.gen = log.Gen()
	ps.rebuildLocked(log, fsys, dir, logger)
}

// ReconcileLocked returns the log generation the state is now exact for
// (storage's generation.go). Batches are recorded as they are placed, before
// they are durable; when the log dropped placed batches since the state was
// last reconciled (a failed write, a truncation), the state may name some of
// them, so it is rebuilt from the snapshot and the durable log first. Every
// batch recorded at an older generation is then durable or dropped, and the
// caller places only at the generation returned (storage.PlaceCheckedAt),
// or reconciles again. Called with mu held.
func (ps *State) ReconcileLocked(log *storage.Log, fsys vfs.FS, dir string, logger *slog.Logger) int64 {
	gen := log.Gen()
	if gen != ps.gen {
		logger.Warn("producer state rebuilt: placed batches were dropped", "generation", gen)
		ps.rebuildLocked(log, fsys, dir, logger)
		ps.gen = gen
	}
	return gen
}

func (ps *State) rebuildLocked(log *storage.Log, fsys vfs.FS, dir string, logger *slog.Logger) {
	ps.m = nil // what the snapshot and the scan do not hold was dropped
	start, hw := log.LogStartOffset(), log.HighWatermark()
	from := max(start, hw-ScanOffsets)
	if at, err := ps.loadSnapshotLocked(fsys, dir, hw); err == nil {
		from = max(at, start, hw-producerMaxScan)
	} else if !errors.Is(err, fs.ErrNotExist) {
		logger.Warn("producer snapshot ignored", "err", err)
		ps.m = nil
	}
	ps.scanLocked(log, from, logger)
	ps.snapAt, ps.changed = hw, 0
}

// loadSnapshotLocked reads the snapshot; it is unusable if it covers more
// than the log holds (the log lost an unsynced tail in a crash).
func (ps *State) loadSnapshotLocked(fsys vfs.FS, dir string, hw int64) (int64, error) {
	at, body, err := journal.ReadSnapshotUpTo(fsys, filepath.Join(dir, producerSnapshotFile), hw)
	if err != nil {
		return 0, err
	}
	m, err := decodeBody(body)
	if err != nil {
		return 0, err
	}
	ps.m = m
	return at, nil
}

// appendBodyLocked encodes every producer with its batches below hw (the body of the
// snapshot file and of Encode). Called with mu held.
func (ps *State) appendBodyLocked(body []byte, hw int64) []byte {
	body = binary.AppendVarint(body, int64(len(ps.m)))
	for id, e := range ps.m {
		durable := e.recent
		for len(durable) > 0 && durable[len(durable)-1].Base >= hw {
			durable = durable[:len(durable)-1]
		}
		body = binary.AppendVarint(body, id)
		body = binary.AppendVarint(body, int64(e.epoch))
		body = binary.AppendVarint(body, int64(len(durable)))
		for _, r := range durable {
			body = binary.AppendVarint(body, int64(r.First))
			body = binary.AppendVarint(body, int64(r.Last))
			body = binary.AppendVarint(body, r.Base)
		}
	}
	return body
}

// decodeBody reads what appendBodyLocked wrote, all of it.
func decodeBody(body []byte) (map[int64]*entry, error) {
	d := wire.Decoder{B: body, Bad: errCorruptSnapshot}
	m := map[int64]*entry{}
	for n := d.Varint(); n > 0 && d.Err == nil; n-- {
		id, e := d.Varint(), &entry{epoch: int16(d.Varint())}
		for k := d.Varint(); k > 0 && d.Err == nil; k-- {
			e.recent = append(e.recent, Range{First: int32(d.Varint()), Last: int32(d.Varint()), Base: d.Varint()})
		}
		m[id] = e
	}
	if d.Err == nil && len(d.B) > 0 {
		d.Fail("%d bytes after the producers", len(d.B))
	}
	return m, d.Err
}

// Encode appends the state as of offset hw (every producer and its batches below hw) to
// dst. A replicated partition's checkpoint carries it, so a replica that restores the
// checkpoint (after a restart, or filled from a peer) decides every later entry — a
// duplicate, a gap, a fenced epoch — as the replicas that never stopped do: a scan of its
// log could not, for the log no longer holds what retention and compaction removed, and
// the scan without a snapshot is bounded (ScanOffsets).
func (ps *State) Encode(dst []byte, hw int64) []byte {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.appendBodyLocked(dst, hw)
}

// Decode replaces the state with one Encode made, for a log at generation gen (Reconcile).
// The next MaybeSnapshot writes it to the partition's directory.
func (ps *State) Decode(body []byte, gen int64) error {
	m, err := decodeBody(body)
	if err != nil {
		return err
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.m, ps.gen, ps.snapAt, ps.changed = m, gen, 0, 1
	return nil
}

// errCorruptSnapshot is what a snapshot that does not decode is.
var errCorruptSnapshot = errors.New("corrupt producer snapshot")

// scanLocked records the idempotent batches from offset from to the end.
// Best effort: damage stops the scan (fetches report it) rather than
// keeping the partition from opening.
func (ps *State) scanLocked(log *storage.Log, from int64, logger *slog.Logger) {
	for pos := from; pos < log.HighWatermark(); {
		data, err := log.Read(pos, 1<<20)
		if err != nil {
			logger.Warn("producer state rebuild stopped", "offset", pos, "err", err)
			return
		}
		if len(data) == 0 {
			return
		}
		for len(data) > 0 {
			h, err := batch.ParseHeader(data)
			if err != nil {
				return // Read returns only validated batches
			}
			if h.ProducerID >= 0 && !h.Control() && h.NextOffset() > from {
				ps.RecordLocked(h, h.BaseOffset)
			}
			data = data[h.Size():]
			pos = h.NextOffset()
		}
	}
}

// MaybeSnapshot writes a snapshot when batches were recorded and the log
// grew producerSnapshotEvery offsets since the last one, or always when
// force is set (at close) and anything changed.
func (ps *State) MaybeSnapshot(log *storage.Log, fsys vfs.FS, dir string, force bool) error {
	ps.mu.Lock()
	// Batches are recorded when placed, under mu, so every idempotent batch
	// below hw is recorded. Those at or above it are placed and not yet
	// durable: a write can still drop them, so the snapshot, which covers
	// what is below hw, leaves them out (the scan after it at open finds
	// them if they became durable).
	hw := log.HighWatermark()
	if ps.changed == 0 || (!force && hw-ps.snapAt < producerSnapshotEvery) {
		ps.mu.Unlock()
		return nil
	}
	body := ps.appendBodyLocked(nil, hw)
	changed := ps.changed
	ps.snapAt, ps.changed = hw, 0
	ps.mu.Unlock()
	if err := vfs.WriteFileAtomic(fsys, dir, producerSnapshotFile, journal.FrameSnapshot(hw, body)); err != nil {
		ps.mu.Lock()
		ps.changed += changed // try again next time
		ps.mu.Unlock()
		return err
	}
	return nil
}

// Expire forgets producers whose every kept batch is below the log start:
// retention removed them, and Kafka forgets them too.
func (ps *State) Expire(logStart int64) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for id, e := range ps.m {
		if len(e.recent) == 0 || e.recent[len(e.recent)-1].Base < logStart {
			delete(ps.m, id)
		}
	}
}
