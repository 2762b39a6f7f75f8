package replqueue

import (
	"bytes"
	"cmp"
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
	encode, err := m.CaptureSnapshot()
	if err != nil {
		return nil, err
	}
	return encode()
}

// capturedSnapshot is the state a snapshot encodes, taken under the lock: what later
// applies change is copied (numbers, the cursor's entries, the keys), what they never
// change is shared (a stored message is never written after it is made; applies only
// drop it from the maps).
type capturedSnapshot struct {
	now, next int64
	applied   uint64
	cur       *queue.CapturedSnapshot
	msgs      []capturedMsg // by offset
	dead      []capturedMsg // by offset, with their receive counts
	keys      []capturedKey
	times     [3]time.Duration
	size      int // what encode writes, about (a little more)
}

type capturedMsg struct {
	off   int64
	s     *stored
	count int // a dead letter's receives
}

type capturedKey struct {
	key        string
	off, until int64
}

// CaptureSnapshot takes the state as of the last applied entry, in the host's Ready loop,
// and returns what encodes it (multiraft.SnapshotCapturer): the host calls it on a
// goroutine of its own while the groups go on, for encoding a backlog of 100,000 messages
// took 200 ms to a second (BenchmarkBacklogSnapshot), during which no group of the node
// advanced. Capturing it copies no body: one pass over the messages (a pointer each, and
// their size for encode's buffer), and a sort; the cursor copies the entries of the
// messages in flight, and sorts and encodes them in encode (with 120,000 in flight, 9–15 ms
// in the loop instead of 51–64: BenchmarkCursorSnapshot in internal/queue).
func (m *Machine) CaptureSnapshot() (func() ([]byte, error), error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := &capturedSnapshot{now: m.now, next: m.next, applied: m.applied, cur: m.cur.CaptureSnapshot()}
	c.size = c.cur.Size() + 64 + binary.MaxVarintLen64 // room for every length and number at its widest
	c.msgs = make([]capturedMsg, 0, len(m.msgs))
	for off, s := range m.msgs {
		c.msgs = append(c.msgs, capturedMsg{off: off, s: s})
		c.size += storedSize(s) + binary.MaxVarintLen64
	}
	c.dead = make([]capturedMsg, 0, len(m.dead))
	for off, d := range m.dead {
		c.dead = append(c.dead, capturedMsg{off: off, s: d.s, count: d.count})
		c.size += storedSize(d.s) + 2*binary.MaxVarintLen64
	}
	byOffset := func(a, b capturedMsg) int { return cmp.Compare(a.off, b.off) }
	slices.SortFunc(c.msgs, byOffset)
	slices.SortFunc(c.dead, byOffset)
	for _, k := range m.dedup.live() {
		c.keys = append(c.keys, capturedKey{key: k.key, off: m.dedup.keys[k.key].off, until: k.until})
		c.size += len(k.key) + 3*binary.MaxVarintLen64
	}
	t := timesOf(m.cfg)
	c.times = [3]time.Duration{t.Visibility, t.MaxExtension, t.Retention}
	m.sinceSnap, m.lastSnap = 0, int64(c.size)
	return c.encode, nil
}

// encode writes the captured state, into a buffer sized first: grown by appends, a
// backlog's snapshot of 100 MiB was copied a dozen times over on its way.
func (c *capturedSnapshot) encode() ([]byte, error) {
	cur := c.cur.Encode()
	b := make([]byte, 0, c.size)
	b = append(b, snapVersion)
	b = binary.AppendVarint(b, c.now)
	b = binary.AppendUvarint(b, uint64(c.next))
	b = binary.AppendUvarint(b, c.applied)
	b = appendBytes(b, cur)
	b = binary.AppendUvarint(b, uint64(len(c.msgs)))
	for _, x := range c.msgs {
		b = binary.AppendUvarint(b, uint64(x.off))
		b = appendStored(b, x.s)
	}
	b = binary.AppendUvarint(b, uint64(len(c.dead)))
	for _, x := range c.dead {
		b = binary.AppendUvarint(b, uint64(x.off))
		b = binary.AppendUvarint(b, uint64(x.count))
		b = appendStored(b, x.s)
	}
	b = binary.AppendUvarint(b, uint64(len(c.keys)))
	for _, k := range c.keys {
		b = appendBytes(b, []byte(k.key))
		b = binary.AppendUvarint(b, uint64(k.off))
		b = binary.AppendVarint(b, k.until)
	}
	for _, v := range c.times {
		b = binary.AppendVarint(b, int64(v))
	}
	return b, nil
}

// storedSize is at least what appendStored writes for s.
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
