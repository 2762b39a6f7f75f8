package replpart

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/queue"
	"github.com/sluice-mq/sluice/internal/wire"
)

// A trim entry is Kafka's DeleteRecords on a replicated partition: it moves the log start
// of every replica at the same point of the group's log, so the replicas agree on where
// the records end for every reader, and the subscriptions' cursors drop what lies below
// it (deliveries in flight included) the same way on every replica.

// trimVersion is the first byte of a trim entry (entryVersion is a produce's,
// cursorVersion a cursor's). A node that does not know it stops the group on it, as on
// any entry it cannot read: every node must run a version that writes trims before one is
// proposed (docs/cluster.md, "Upgrades").
const trimVersion = 3

// TrimToEnd is the offset that trims to the log's end as the entry applies (Kafka's -1,
// the high watermark).
const TrimToEnd = -1

// TrimEntry moves the log start up to Offset (TrimToEnd: the log's end when it applies).
type TrimEntry struct {
	Origin  uint64
	Request uint64
	Offset  int64
}

// Encode appends e's encoding to b:
//
//	version(1)=3 origin(uvarint) request(uvarint) offset(varint)
func (e *TrimEntry) Encode(b []byte) []byte {
	b = append(b, trimVersion)
	b = binary.AppendUvarint(b, e.Origin)
	b = binary.AppendUvarint(b, e.Request)
	return binary.AppendVarint(b, e.Offset)
}

// decodeTrim parses a trim entry (b[0] == trimVersion). Any malformed input (a short or
// long entry, an offset below TrimToEnd) is ErrBadEntry.
func decodeTrim(b []byte) (TrimEntry, error) {
	var e TrimEntry
	d := wire.Decoder{B: b[1:], Bad: ErrBadEntry}
	e.Origin = d.Uvarint()
	e.Request = d.Uvarint()
	e.Offset = d.Varint()
	d.Done()
	if d.Err == nil && e.Offset < TrimToEnd {
		d.Fail("trim to offset %d", e.Offset)
	}
	return e, d.Err
}

// TrimResult is what a trim did on one replica. Cut is the offset it resolved (TrimToEnd
// becomes the log's end; the same on every replica, whose logs end alike at every entry),
// Start the replica's log start after it (its own retention may have moved it further),
// Err a deterministic refusal (an offset past the log's end: nothing changed).
type TrimResult struct {
	Cut, Start int64
	Err        error
}

// Trimmer is a Log that can move its start: DeleteRecords needs it.
type Trimmer interface {
	// Trim moves the log start up to offset (TrimToEnd: its end) and says what it did.
	// An offset at or below the start changes nothing and answers the start; one past the
	// end is TrimResult.Err (queue.ErrOutOfRange-like, the caller's to map). A returned
	// error (disk) stops the group here.
	Trim(offset int64) (TrimResult, error)
}

// Trim moves the partition's log start up to offset on every replica (TrimToEnd: the log's
// end as the entry applies) and returns the log start this node has after it, once the
// entry is committed and applied here. Append's errors, and the log's refusal.
func (p *Partition) Trim(ctx context.Context, offset int64) (int64, error) {
	c, err := p.startTrim(offset)
	if err != nil {
		return 0, err
	}
	if err := c.wait(ctx); err != nil {
		return 0, err
	}
	r, err := p.finishTrim(c)
	if err != nil {
		return 0, err
	}
	return r.Start, r.Err
}

func (p *Partition) startTrim(offset int64) (*call, error) {
	if offset < TrimToEnd {
		return nil, fmt.Errorf("%w: trim to offset %d", ErrBadAppend, offset)
	}
	if err := p.admitted(TrimKind); err != nil {
		return nil, err
	}
	e := TrimEntry{Origin: uint64(p.host.Node()), Request: p.seq.Add(1), Offset: offset}
	pr, err := p.host.ProposeAsync(p.group, e.Encode(nil))
	if err != nil {
		return nil, mapErr(err)
	}
	return &call{p: pr, req: e.Request}, nil
}

func (p *Partition) finishTrim(c *call) (TrimResult, error) { return take(c, &p.sm.trimResults) }

// applyTrim moves the local log's start and finishes every cursor's records below the cut.
// A log that cannot trim, or fails to, stops the group: a replica that skipped the entry
// would serve records the others no longer have.
func (m *Machine) applyTrim(e multiraft.Entry) error {
	te, err := decodeTrim(e.Data)
	if err != nil {
		return fmt.Errorf("replpart: entry %d: %w", e.Index, err)
	}
	t, ok := m.log.(Trimmer)
	if !ok {
		return fmt.Errorf("replpart: entry %d: the local log cannot trim", e.Index)
	}
	r, err := t.Trim(te.Offset)
	if err != nil {
		return fmt.Errorf("replpart: entry %d: trim to %d: %w", e.Index, te.Offset, err)
	}
	if r.Err == nil {
		m.mu.Lock()
		err = m.expireCursorsBelow(r.Cut)
		m.mu.Unlock()
		if err != nil {
			return fmt.Errorf("replpart: entry %d: %w", e.Index, err)
		}
	}
	if te.Origin == m.node {
		m.trimResults.Keep(e.Index, te.Request, r)
	}
	// A snapshot after this Ready: its checkpoint makes the moved start durable (a log may
	// keep it in memory until then, as the broker's does) and deletes what lies below it,
	// rather than after the next SnapshotBytes of produce.
	m.sinceSnap = max(m.sinceSnap+int64(len(e.Data)), m.snapshotLimit())
	return nil
}

// expireCursorsBelow finishes, in every cursor, what lies below cut: buffered, delayed and
// in flight alike (a receipt for one of them is stale from now on), as a single node's
// DeleteRecords does. Called with mu held.
func (m *Machine) expireCursorsBelow(cut int64) error {
	for id, sc := range m.cursors {
		if sc.cur.Floor() >= cut {
			continue
		}
		if err := sc.cur.Apply(queue.Expired{From: sc.cur.Floor(), To: cut}); err != nil {
			return fmt.Errorf("subscription %d: expire below %d: %w", id, cut, err)
		}
	}
	return nil
}
