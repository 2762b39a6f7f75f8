package replpart

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"

	"github.com/sluice-mq/sluice/internal/cluster/replcursor"
	"github.com/sluice-mq/sluice/internal/queue"
	"github.com/sluice-mq/sluice/internal/wire"
)

// snapVersionCursors is a snapshot that carries the subscriptions' cursors:
//
//	version(1)=2 checkpoint(bytes) now(varint unix ns) count(uvarint)
//	  {sub(uvarint) config(as in a create entry) cursor(bytes, queue.Cursor.Snapshot)}...
//
// by subscription id. A snapshot of version 1 (the checkpoint alone) has no cursors. The
// cursors ride in the Raft snapshot itself (they are small: a cursor's snapshot holds the
// records in flight and the finished ranges, never the backlog), so a replica seeded by a
// snapshot — a new one, one past the compacted log — gets them with the checkpoint, and
// the Raft log is never compacted past a cursor event no snapshot holds.
const snapVersionCursors = 2

// snapVersionDead is snapVersionCursors with each cursor followed by its dead letters
// (cursor_dead.go):
//
//	count(uvarint) {offset(uvarint) receives(uvarint)}...   by offset
//
// Written only when some cursor has dead letters, so a node of an older build reads every
// snapshot until a subscription's dead-letter queue is first used.
const snapVersionDead = 3

// maxCursorSnapshot bounds one cursor's snapshot when decoding (raft ships a snapshot in
// one message; the host refuses far smaller ones long before this).
const maxCursorSnapshot = 256 << 20

// encodeSnapshot is the snapshot of a checkpoint and the cursors (under mu).
func (m *Machine) encodeSnapshot(cp []byte) []byte {
	if len(m.cursors) == 0 && m.clock.UnixNano() == 0 {
		return append([]byte{snapVersion}, cp...)
	}
	version := byte(snapVersionCursors)
	for _, sc := range m.cursors {
		if len(sc.dead) > 0 {
			version = snapVersionDead
		}
	}
	b := []byte{version}
	b = replcursor.AppendBytes(b, cp)
	b = binary.AppendVarint(b, m.clock.UnixNano())
	ids := make([]uint64, 0, len(m.cursors))
	for id := range m.cursors {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	b = binary.AppendUvarint(b, uint64(len(ids)))
	for _, id := range ids {
		sc := m.cursors[id]
		b = binary.AppendUvarint(b, id)
		b = appendCursorConfig(b, sc.cfg)
		b = replcursor.AppendBytes(b, sc.cur.Snapshot())
		if version == snapVersionDead {
			offs := slices.Sorted(maps.Keys(sc.dead))
			b = binary.AppendUvarint(b, uint64(len(offs)))
			for _, off := range offs {
				b = binary.AppendUvarint(b, uint64(off))
				b = binary.AppendUvarint(b, uint64(sc.dead[off]))
			}
		}
	}
	return b
}

// snapshotParts is a decoded snapshot.
type snapshotParts struct {
	checkpoint []byte // nil: the empty log
	now        int64
	cursors    map[uint64]*subCursor
}

// decodeSnapshot parses a snapshot of either version; cursors only if withCursors (a
// snapshot's preparation needs the checkpoint alone).
func decodeSnapshot(data []byte, withCursors bool) (snapshotParts, error) {
	p := snapshotParts{cursors: map[uint64]*subCursor{}}
	if len(data) == 0 {
		return p, nil
	}
	switch data[0] {
	case snapVersion:
		p.checkpoint = data[1:]
		return p, nil
	case snapVersionCursors, snapVersionDead:
	default:
		return p, fmt.Errorf("replpart: snapshot version %d", data[0])
	}
	d := wire.Decoder{B: data[1:], Bad: ErrBadEntry}
	if p.checkpoint = d.Bytes(uint64(len(data))); len(p.checkpoint) == 0 {
		p.checkpoint = nil // the empty log, as an empty snapshot
	}
	p.now = d.Varint()
	n := d.Uvarint()
	if n > uint64(len(data)) {
		d.Fail("%d cursors in %d bytes", n, len(data))
	}
	for i := uint64(0); i < n && d.Err == nil && withCursors; i++ {
		id := d.Uvarint()
		cfg := readCursorConfig(&d)
		snap := d.Bytes(maxCursorSnapshot)
		if d.Err != nil {
			break
		}
		var dead map[int64]int
		if data[0] == snapVersionDead {
			dead = readDeadLetters(&d, len(data))
		}
		if d.Err != nil {
			break
		}
		cur, err := queue.Restore(cfg.Queue, snap)
		if err != nil {
			return p, fmt.Errorf("replpart: snapshot: subscription %d: %w", id, err)
		}
		p.cursors[id] = &subCursor{cfg: cfg, cur: cur, dead: dead}
	}
	if withCursors {
		d.Done()
	}
	if d.Err != nil {
		return p, fmt.Errorf("replpart: snapshot: %w", d.Err)
	}
	return p, nil
}

// readDeadLetters reads one cursor's dead letters of a snapshot of size bytes (nil: none).
func readDeadLetters(d *wire.Decoder, size int) map[int64]int {
	n := d.Uvarint()
	if n > uint64(size) {
		d.Fail("%d dead letters in %d bytes", n, size)
		return nil
	}
	if n == 0 {
		return nil
	}
	dead := make(map[int64]int, n)
	for range n {
		off, count := d.Uvarint(), d.Uvarint()
		if d.Err == nil && (off > math.MaxInt64 || count > MaxReceiveLimit) {
			d.Fail("dead letter at %d with %d receives", off, count)
		}
		if d.Err != nil {
			return nil
		}
		dead[int64(off)] = int(count)
	}
	return dead
}
