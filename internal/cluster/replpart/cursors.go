package replpart

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/replcursor"
	"github.com/sluice-mq/sluice/internal/queue"
)

// Errors of cursor entries, results for the proposer (every replica computed the same).
var (
	// ErrCursorExists: a create for a subscription whose cursor the partition already has.
	ErrCursorExists = errors.New("replpart: the subscription already has a cursor here")
	// ErrCursorNotFound: a command for a subscription without a cursor in the partition.
	ErrCursorNotFound = errors.New("replpart: no cursor for the subscription here")
	// ErrNoRecordLog: the partition's Log cannot be read by a cursor (not a RecordLog).
	ErrNoRecordLog = errors.New("replpart: the partition's log serves no cursor")
	// ErrCursorDeadLetter: a cursor config with MaxReceives. The limit comes with each
	// limited Receive instead (CursorReceiveLimited), as replqueue's, so every replica
	// applies the limit the entry carries.
	ErrCursorDeadLetter = errors.New("replpart: a cursor's receive limit comes with each receive, not in its config")
)

// RecordMeta is what a subscription's cursor needs of one record.
type RecordMeta struct {
	Offset    int64
	Timestamp int64 // unix ms, the record's own (a delay and retention count from it)
	Key       []byte
	HasKey    bool
}

// RecordLog is a Log a subscription's cursor reads, in apply: on every replica the local
// log holds exactly the records of the entries applied so far, so the same reads give the
// same metas. Called from the Ready loop only.
type RecordLog interface {
	// Bounds are the local log's start and end (the offset after its last record).
	Bounds() (start, end int64)
	// Records returns the metas of up to max records at or after from, in offset order,
	// and next, the offset after what it read (past records and any gap); next <= from
	// means nothing can be read at from.
	Records(from int64, max int) ([]RecordMeta, int64, error)
}

// subCursor is one subscription's cursor in this partition.
type subCursor struct {
	cfg CursorConfig
	cur *queue.Cursor
	// dead are the records a limited Receive moved out of the cursor, by offset, with
	// the receives each had, until a DeadDone says their copies are committed
	// (cursor_dead.go). In the snapshot.
	dead map[int64]int
}

// CursorResult is what a cursor entry did, for its proposer.
type CursorResult struct {
	Deliveries []queue.Delivery // Receive
	Err        error            // a refusal (stale receipt, no cursor, out of range)
}

// applyCursor applies one cursor entry at the group's clamped time. A refusal is a
// result; an error (the log could not be read) stops the group here, since skipping the
// entry would leave this replica's cursor different from the others'.
func (m *Machine) applyCursor(e multiraft.Entry) error {
	ce, err := decodeCursor(e.Data)
	if err != nil {
		return fmt.Errorf("replpart: entry %d: %w", e.Index, err)
	}
	m.mu.Lock()
	r, err := m.runCursor(&ce)
	m.mu.Unlock()
	if err != nil {
		return fmt.Errorf("replpart: entry %d: subscription %d: %w", e.Index, ce.Sub, err)
	}
	if ce.Origin == m.node {
		m.cursorResults.Keep(e.Index, ce.Request, r)
	}
	m.sinceSnap += int64(len(e.Data))
	return nil
}

// runCursor is applyCursor under mu.
func (m *Machine) runCursor(ce *CursorEntry) (CursorResult, error) {
	now := m.clock.Advance(ce.Now)
	rl, ok := m.log.(RecordLog)
	if !ok {
		return CursorResult{Err: ErrNoRecordLog}, nil
	}
	sc := m.cursors[ce.Sub]
	switch ce.Kind {
	case CursorCreate:
		if sc != nil {
			return CursorResult{Err: ErrCursorExists}, nil
		}
		return m.createCursor(rl, ce), nil
	case CursorDelete:
		if sc == nil {
			return CursorResult{Err: ErrCursorNotFound}, nil
		}
		delete(m.cursors, ce.Sub)
		return CursorResult{}, nil
	}
	if sc == nil {
		return CursorResult{Err: ErrCursorNotFound}, nil
	}
	switch ce.Kind {
	case CursorReceiveLimited:
		return sc.receiveLimited(rl, now, ce.Op, ce.Limit)
	case CursorDeadDone:
		sc.deadDone(ce.Offsets)
		return CursorResult{}, nil
	case CursorSkipTo:
		return sc.skipTo(rl, ce.To)
	case CursorDeadLetter:
		return sc.deadLetter(now, ce.Op.Receipt)
	}
	if ce.Kind == replcursor.Receive {
		if err := fill(sc, rl, now); err != nil {
			return CursorResult{}, err
		}
	}
	op := ce.Op
	op.Kind = ce.Kind
	ds, _, err := replcursor.Run(sc.cur, now, op)
	if f := sc.cur.Fault(); f != nil {
		return CursorResult{}, fmt.Errorf("cursor fault: %w", f)
	}
	return CursorResult{Deliveries: ds, Err: err}, nil
}

// createCursor starts a subscription's cursor at the log's end as this entry applies (the
// same point on every replica), or at its start.
func (m *Machine) createCursor(rl RecordLog, ce *CursorEntry) CursorResult {
	if ce.Config.Queue.MaxReceives != 0 {
		return CursorResult{Err: ErrCursorDeadLetter}
	}
	cur, err := queue.New(ce.Config.Queue)
	if err != nil {
		return CursorResult{Err: err}
	}
	start, end := rl.Bounds()
	if ce.Config.FromEarliest {
		end = start
	}
	cur.Skip(end)
	m.cursors[ce.Sub] = &subCursor{cfg: ce.Config, cur: cur}
	return CursorResult{}
}

// fill offers the cursor the records after its read position, as many as it wants. What
// lies below the local log's start (retention) is skipped.
func fill(sc *subCursor, rl RecordLog, now time.Time) error {
	c := sc.cur
	for c.Wants() > 0 {
		pos := c.ReadPos()
		start, end := rl.Bounds()
		if pos < start {
			c.Skip(start)
			continue
		}
		if pos >= end {
			return nil
		}
		recs, next, err := rl.Records(pos, c.Wants())
		if err != nil {
			return fmt.Errorf("read the log at %d: %w", pos, err)
		}
		if len(recs) == 0 {
			if next <= pos {
				return nil
			}
			c.Skip(next)
			continue
		}
		k, _ := c.Offer(now, sc.metas(recs))
		if k == 0 {
			return nil
		}
		if next > pos && k == len(recs) && c.ReadPos() < next {
			c.Skip(next) // a gap after the last record read (compaction, a marker)
		}
	}
	return nil
}

// metas are the cursor's view of records: in a FIFO (key-ordered) cursor a record's group
// is its key, and a record without one is a group of its own.
func (sc *subCursor) metas(recs []RecordMeta) []queue.Meta {
	out := make([]queue.Meta, len(recs))
	for i, r := range recs {
		m := queue.Meta{Offset: r.Offset, SentAt: time.UnixMilli(r.Timestamp).UTC()}
		if r.Timestamp <= 0 {
			m.SentAt = time.Time{}
		}
		if sc.cfg.Delay > 0 && !m.SentAt.IsZero() {
			m.AvailableAt = m.SentAt.Add(sc.cfg.Delay)
		}
		if sc.cfg.Queue.FIFO {
			if r.HasKey {
				m.GroupID = "k" + string(r.Key)
			} else {
				m.GroupID = fmt.Sprintf("o%d", r.Offset)
			}
		}
		out[i] = m
	}
	return out
}

// CursorState is one subscription's cursor as this replica holds it.
type CursorState struct {
	Sub      uint64
	Floor    int64
	Snapshot []byte       // the cursor's own snapshot: equal on replicas that applied as far
	Dead     []DeadLetter // its dead letters waiting for their copies, by offset
}

// Cursors returns the subscriptions' cursors here, by subscription id.
func (m *Machine) Cursors() []CursorState {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]CursorState, 0, len(m.cursors))
	for id, sc := range m.cursors {
		out = append(out, CursorState{Sub: id, Floor: sc.cur.Floor(), Snapshot: sc.cur.Snapshot(), Dead: sc.deadLetters(len(sc.dead))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Sub < out[j].Sub })
	return out
}

// CursorFloor is the lowest offset any subscription's cursor here still needs (the log's
// end if none): what retention must not delete beyond, if it honours subscriptions.
func (m *Machine) CursorFloor() (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	floor, any := int64(0), false
	for _, sc := range m.cursors {
		if f := sc.cur.Floor(); !any || f < floor {
			floor, any = f, true
		}
	}
	return floor, any
}

// Now is the group's latest applied time: a proposer stamps no earlier one.
func (m *Machine) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.clock.Now()
}

// CursorReady says, without changing the cursor (only a committed entry may), whether a
// Receive of sub at now could deliver: records ready or come due, or records in the local
// log the cursor has not read yet. next is when something waiting comes due (zero: nothing
// waits). A subscription without a cursor here is never ready.
func (m *Machine) CursorReady(sub uint64, now time.Time) (ready bool, next time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sc := m.cursors[sub]
	if sc == nil {
		return false, time.Time{}
	}
	next, waits := sc.cur.NextDue()
	if sc.cur.Counts().Ready > 0 || (waits && !now.Before(next)) {
		return true, next
	}
	if rl, ok := m.log.(RecordLog); ok && sc.cur.Wants() > 0 {
		if _, end := rl.Bounds(); sc.cur.ReadPos() < end {
			return true, next
		}
	}
	return false, next
}

// HasCursor reports whether subscription sub has a cursor in this partition here.
// CursorIDs are the subscriptions that have a cursor here, sorted: what the broker's
// reconciler compares with the catalog every second (Cursors would snapshot each).
func (m *Machine) CursorIDs() []uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.cursors))
}

// CursorCount is how many subscriptions have a cursor here: for the reconciler's common
// case (no subscription, no cursor) without CursorIDs' sorted copy.
func (m *Machine) CursorCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.cursors)
}

func (m *Machine) HasCursor(sub uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cursors[sub] != nil
}

// CursorCounts are subscription sub's cursor counts here (queue.Cursor.Counts: read only),
// and whether it has a cursor here.
func (m *Machine) CursorCounts(sub uint64) (queue.Stats, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sc := m.cursors[sub]
	if sc == nil {
		return queue.Stats{}, false
	}
	return sc.cur.Counts(), true
}

// CursorStart is subscription sub's cursor floor here (the lowest offset not yet finished:
// a share-partition's start offset) and how many records from it to hw are not finished,
// and whether it has a cursor here.
func (m *Machine) CursorStart(sub uint64, hw int64) (start, unfinished int64, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sc := m.cursors[sub]
	if sc == nil {
		return 0, 0, false
	}
	f := sc.cur.Floor()
	return f, sc.cur.Unfinished(f, hw), true
}
