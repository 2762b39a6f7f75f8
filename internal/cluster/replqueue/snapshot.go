package replqueue

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/sluice-mq/sluice/internal/queue"
	"github.com/sluice-mq/sluice/internal/wire"
)

// snapVersion 2 adds each message's group and dedup id, the dead letters and the
// deduplication keys; version 3 the queue's times (configure.go). Versions 1 (none of
// them) and 2 are still restored, with the times the queue was created with.
const snapVersion = 3

// Snapshot encodes the state: the cursor's own snapshot and the body of every message not
// yet finished (not a pointer into the retained log: the host compacts the Raft log below
// each snapshot, so a body older than the snapshot exists nowhere else).
//
//	version(1) now(varint) next(uvarint) applied(uvarint) cursor(bytes)
//	count(uvarint) {offset(uvarint) sentAt(varint) availAt(varint) body(bytes)
//	                nattrs(uvarint) {key(bytes) value(bytes)}...
//	                group(bytes) dedup(bytes)}...                        by offset
//	ndead(uvarint) {offset(uvarint) count(uvarint) message as above}... by offset
//	nkeys(uvarint) {key(bytes) offset(uvarint) until(varint)}...        by insertion
//	visibility(varint ns) maxExtension(varint ns) retention(varint ns)    version 3
//
// (version 1 ends after the messages, which have no group nor dedup; version 2 after the
// keys.)
func (m *Machine) Snapshot() ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	// Sized first: grown by appends, a backlog's snapshot of 100 MiB was copied a dozen
	// times over on its way (BenchmarkBacklogSnapshot).
	curSnap := m.cur.Snapshot()
	b := make([]byte, 0, len(curSnap)+m.snapshotSizeLocked())
	b = append(b, snapVersion)
	b = binary.AppendVarint(b, m.now)
	b = binary.AppendUvarint(b, uint64(m.next))
	b = binary.AppendUvarint(b, m.applied)
	b = appendBytes(b, curSnap)
	offs := make([]int64, 0, len(m.msgs))
	for off := range m.msgs {
		offs = append(offs, off)
	}
	slices.Sort(offs)
	b = binary.AppendUvarint(b, uint64(len(offs)))
	for _, off := range offs {
		b = binary.AppendUvarint(b, uint64(off))
		b = appendStored(b, m.msgs[off])
	}
	offs = offs[:0]
	for off := range m.dead {
		offs = append(offs, off)
	}
	slices.Sort(offs)
	b = binary.AppendUvarint(b, uint64(len(offs)))
	for _, off := range offs {
		b = binary.AppendUvarint(b, uint64(off))
		b = binary.AppendUvarint(b, uint64(m.dead[off].count))
		b = appendStored(b, m.dead[off].s)
	}
	keys := m.dedup.live()
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = appendBytes(b, []byte(k.key))
		b = binary.AppendUvarint(b, uint64(m.dedup.keys[k.key].off))
		b = binary.AppendVarint(b, k.until)
	}
	t := timesOf(m.cfg)
	for _, v := range []time.Duration{t.Visibility, t.MaxExtension, t.Retention} {
		b = binary.AppendVarint(b, int64(v))
	}
	m.sinceSnap, m.lastSnap = 0, int64(len(b))
	return b, nil
}

// snapshotSizeLocked is about what Snapshot writes besides the cursor's own snapshot (a
// little more): room for every length and number at its widest.
func (m *Machine) snapshotSizeLocked() int {
	n := 64 + binary.MaxVarintLen64
	for _, s := range m.msgs {
		n += storedSize(s) + binary.MaxVarintLen64
	}
	for _, d := range m.dead {
		n += storedSize(d.s) + 2*binary.MaxVarintLen64
	}
	for k := range m.dedup.keys {
		n += len(k) + 3*binary.MaxVarintLen64
	}
	return n
}

func storedSize(s *stored) int {
	n := len(s.body) + len(s.group) + len(s.dedup) + 6*binary.MaxVarintLen64
	for _, a := range s.attrs {
		n += len(a.Key) + len(a.Value) + 2*binary.MaxVarintLen64
	}
	return n
}

func appendStored(b []byte, s *stored) []byte {
	b = binary.AppendVarint(b, s.sentAt)
	b = binary.AppendVarint(b, s.availAt)
	b = appendBytes(b, s.body)
	b = binary.AppendUvarint(b, uint64(len(s.attrs)))
	for _, a := range s.attrs {
		b = appendBytes(b, []byte(a.Key))
		b = appendBytes(b, []byte(a.Value))
	}
	b = appendBytes(b, []byte(s.group))
	return appendBytes(b, []byte(s.dedup))
}

// stored reads what appendStored wrote (version 1: without group and dedup).
func (d *decoder) stored(version byte, limit uint64) *stored {
	s := &stored{sentAt: d.Varint(), availAt: d.Varint(), body: bytes.Clone(d.Bytes(limit))}
	na := d.Uvarint()
	if na > MaxAttrs {
		d.Fail("%d attributes", na)
	}
	for j := uint64(0); j < na && d.Err == nil; j++ {
		s.attrs = append(s.attrs, Attr{Key: string(d.Bytes(MaxString)), Value: string(d.Bytes(MaxString))})
	}
	if version >= 2 {
		s.group = string(d.Bytes(MaxString))
		s.dedup = string(d.Bytes(MaxString))
	}
	return s
}

// Restore replaces the state by a snapshot's (nil: the empty queue). Results kept for
// proposers are dropped: a replica that restores a snapshot lost sight of its proposals'
// entries, and multiraft fails them with ErrOutcomeUnknown.
func (m *Machine) Restore(data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.results.Reset()
	m.sinceSnap, m.lastSnap = 0, int64(len(data))
	if len(data) == 0 {
		cur, err := queue.New(m.initial)
		if err != nil {
			return err
		}
		m.cfg = cur.Config()
		m.cur, m.msgs, m.next, m.now, m.applied = cur, map[int64]*stored{}, 0, 0, 0
		m.dead, m.dedup = map[int64]*deadLetter{}, newDedupState()
		return nil
	}
	version := data[0]
	if version < 1 || version > snapVersion {
		return fmt.Errorf("replqueue: snapshot version %d", data[0])
	}
	d := decoder{wire.Decoder{B: data[1:], Bad: ErrBadCommand}}
	now := d.Varint()
	next := d.Uvarint()
	applied := d.Uvarint()
	curSnap := d.Bytes(uint64(len(data)))
	n := d.Uvarint()
	if d.Err == nil && n > uint64(len(d.B)) {
		d.Fail("%d messages in %d bytes", n, len(d.B))
	}
	msgs := make(map[int64]*stored, min(n, uint64(len(d.B))))
	for i := uint64(0); i < n && d.Err == nil; i++ {
		off := int64(d.Uvarint())
		s := d.stored(version, uint64(len(data)))
		if off < 0 || off >= int64(next) {
			d.Fail("message offset %d past next %d", off, next)
		}
		msgs[off] = s
	}
	dead, dedup := map[int64]*deadLetter{}, newDedupState()
	if version >= 2 {
		d.restoreV2(dead, &dedup, int64(next), uint64(len(data)))
	}
	cfg := m.initial
	if version >= 3 {
		cfg = Times{Visibility: d.duration(), MaxExtension: d.duration(), Retention: d.duration()}.on(cfg)
	}
	d.Done()
	if d.Err != nil {
		return fmt.Errorf("replqueue: snapshot: %w", d.Err)
	}
	cur, err := queue.Restore(cfg, curSnap)
	if err != nil {
		return fmt.Errorf("replqueue: snapshot: %w", err)
	}
	m.cfg = cur.Config()
	m.cur, m.msgs, m.next, m.now, m.applied = cur, msgs, int64(next), now, applied
	m.dead, m.dedup = dead, dedup
	m.fill(time.Unix(0, now).UTC())
	return nil
}

// restoreV2 reads the dead letters and the deduplication keys.
func (d *decoder) restoreV2(dead map[int64]*deadLetter, dedup *dedupState, next int64, limit uint64) {
	n := d.Uvarint()
	if d.Err == nil && n > uint64(len(d.B)) {
		d.Fail("%d dead letters in %d bytes", n, len(d.B))
	}
	for i := uint64(0); i < n && d.Err == nil; i++ {
		off := int64(d.Uvarint())
		count := d.Uvarint()
		s := d.stored(2, limit)
		if off < 0 || off >= next || count > 1<<31 {
			d.Fail("dead letter offset %d (next %d) count %d", off, next, count)
		}
		dead[off] = &deadLetter{s: s, count: int(count)}
	}
	n = d.Uvarint()
	if d.Err == nil && n > uint64(len(d.B)) {
		d.Fail("%d keys in %d bytes", n, len(d.B))
	}
	for i := uint64(0); i < n && d.Err == nil; i++ {
		key := string(d.Bytes(MaxString))
		off := int64(d.Uvarint())
		until := d.Varint()
		if off < 0 || off >= next {
			d.Fail("dedup offset %d past next %d", off, next)
		}
		dedup.record(key, off, until)
	}
}
