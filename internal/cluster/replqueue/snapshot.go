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

const snapVersion = 1

// Snapshot encodes the state: the cursor's own snapshot and the body of every message not
// yet finished (not a pointer into the retained log: the host compacts the Raft log below
// each snapshot, so a body older than the snapshot exists nowhere else).
//
//	version(1) now(varint) next(uvarint) applied(uvarint) cursor(bytes)
//	count(uvarint) {offset(uvarint) sentAt(varint) availAt(varint) body(bytes)
//	                nattrs(uvarint) {key(bytes) value(bytes)}...}...   by offset
func (m *Machine) Snapshot() ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := []byte{snapVersion}
	b = binary.AppendVarint(b, m.now)
	b = binary.AppendUvarint(b, uint64(m.next))
	b = binary.AppendUvarint(b, m.applied)
	b = appendBytes(b, m.cur.Snapshot())
	offs := make([]int64, 0, len(m.msgs))
	for off := range m.msgs {
		offs = append(offs, off)
	}
	slices.Sort(offs)
	b = binary.AppendUvarint(b, uint64(len(offs)))
	for _, off := range offs {
		s := m.msgs[off]
		b = binary.AppendUvarint(b, uint64(off))
		b = binary.AppendVarint(b, s.sentAt)
		b = binary.AppendVarint(b, s.availAt)
		b = appendBytes(b, s.body)
		b = binary.AppendUvarint(b, uint64(len(s.attrs)))
		for _, a := range s.attrs {
			b = appendBytes(b, []byte(a.Key))
			b = appendBytes(b, []byte(a.Value))
		}
	}
	return b, nil
}

// Restore replaces the state by a snapshot's (nil: the empty queue). Results kept for
// proposers are dropped: a replica that restores a snapshot lost sight of its proposals'
// entries, and multiraft fails them with ErrOutcomeUnknown.
func (m *Machine) Restore(data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.results.Reset()
	if len(data) == 0 {
		cur, err := queue.New(m.cfg)
		if err != nil {
			return err
		}
		m.cur, m.msgs, m.next, m.now, m.applied = cur, map[int64]*stored{}, 0, 0, 0
		return nil
	}
	if data[0] != snapVersion {
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
		s := &stored{sentAt: d.Varint(), availAt: d.Varint(), body: bytes.Clone(d.Bytes(uint64(len(data))))}
		na := d.Uvarint()
		if na > MaxAttrs {
			d.Fail("%d attributes", na)
		}
		for j := uint64(0); j < na && d.Err == nil; j++ {
			s.attrs = append(s.attrs, Attr{Key: string(d.Bytes(MaxString)), Value: string(d.Bytes(MaxString))})
		}
		if off < 0 || off >= int64(next) {
			d.Fail("message offset %d past next %d", off, next)
		}
		msgs[off] = s
	}
	d.Done()
	if d.Err != nil {
		return fmt.Errorf("replqueue: snapshot: %w", d.Err)
	}
	cur, err := queue.Restore(m.cfg, curSnap)
	if err != nil {
		return fmt.Errorf("replqueue: snapshot: %w", err)
	}
	m.cur, m.msgs, m.next, m.now, m.applied = cur, msgs, int64(next), now, applied
	m.fill(time.Unix(0, now).UTC())
	return nil
}
