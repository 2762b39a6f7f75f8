package replpart

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"

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

// encodeSnapshot is the snapshot of a checkpoint and the cursors (under mu), encoded at
// once: each cursor's records are encoded where they are, not copied first.
func (m *Machine) encodeSnapshot(cp []byte) []byte { return m.cursorsOf(cp, false).encode() }

// capturedSnap is what encodeSnapshot writes, copied under mu (captureCursors) so that
// CaptureSnapshot's encoding, off the Ready loop, sorts and encodes the cursors' records
// in flight (queue.Cursor.CaptureSnapshot: 51–64 ms in the loop with 120,000 in flight,
// 9–15 ms to copy them) while applies go on.
type capturedSnap struct {
	version byte
	cp      []byte
	now     int64
	cursors []capturedCursor // by subscription id
}

type capturedCursor struct {
	id   uint64
	cfg  CursorConfig
	cur  *queue.CapturedSnapshot // captured, to encode later; or
	enc  []byte                  // encoded already (encodeSnapshot)
	dead [][2]uint64             // offset, receives; by offset
}

// captureCursors copies the cursors for a snapshot with checkpoint cp (under mu).
func (m *Machine) captureCursors(cp []byte) *capturedSnap { return m.cursorsOf(cp, true) }

// cursorsOf takes the cursors for a snapshot with checkpoint cp (under mu): captured if
// capture, else each one's snapshot encoded now.
func (m *Machine) cursorsOf(cp []byte, capture bool) *capturedSnap {
	c := &capturedSnap{version: snapVersion, cp: cp, now: m.clock.UnixNano()}
	if len(m.cursors) == 0 && c.now == 0 {
		return c
	}
	c.version = snapVersionCursors
	for _, id := range slices.Sorted(maps.Keys(m.cursors)) {
		sc := m.cursors[id]
		cc := capturedCursor{id: id, cfg: sc.cfg}
		if capture {
			cc.cur = sc.cur.CaptureSnapshot()
		} else {
			cc.enc = sc.cur.Snapshot()
		}
		if len(sc.dead) > 0 {
			c.version = snapVersionDead
			for _, off := range slices.Sorted(maps.Keys(sc.dead)) {
				cc.dead = append(cc.dead, [2]uint64{uint64(off), uint64(sc.dead[off])})
			}
		}
		c.cursors = append(c.cursors, cc)
	}
	return c
}

func (c *capturedSnap) encode() []byte {
	if c.version == snapVersion {
		return append([]byte{snapVersion}, c.cp...)
	}
	b := []byte{c.version}
	b = replcursor.AppendBytes(b, c.cp)
	b = binary.AppendVarint(b, c.now)
	b = binary.AppendUvarint(b, uint64(len(c.cursors)))
	for _, cc := range c.cursors {
		b = binary.AppendUvarint(b, cc.id)
		b = appendCursorConfig(b, cc.cfg)
		enc := cc.enc
		if cc.cur != nil {
			enc = cc.cur.Encode()
		}
		b = replcursor.AppendBytes(b, enc)
		if c.version == snapVersionDead {
			b = binary.AppendUvarint(b, uint64(len(cc.dead)))
			for _, d := range cc.dead {
				b = binary.AppendUvarint(b, d[0])
				b = binary.AppendUvarint(b, d[1])
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
