package replpart

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/queue"
)

// Moving a subscription's start: a SkipTo entry finishes every record of the cursor below
// an offset, delivered or not, on every replica alike (Kafka's AlterShareGroupOffsets; a
// single node's cursor does the same with a Skipped event). It is proposed by the
// partition's leader; a node that does not lead, or does not even host the partition (a
// share group's coordinator need not), asks a replica over a multiraft request:
//
//	request:  version(1)=1 | kind(1)=2 (skip) | sub(uvarint) | to(uvarint)
//	response: version(1)=1 | status(1) | a(uvarint) | b(uvarint)
//
// status 0 done; 1 not the leader (a: the leader it knows, 0 none); 2 out of range (a: the
// cursor's start, b: the log's end, as the entry applied); 3 no cursor for sub. A failure
// with no status (the outcome unknown, a stopped host) comes back as the request's error.

const skipKind = 2

const (
	skipDone = iota
	skipNotLeader
	skipOutOfRange
	skipNoCursor
)

// skipTimeout bounds a served skip's wait for its entry, under the requester's own deadline.
const skipTimeout = 10 * time.Second

// ErrBadSkip is a skip request or response that is not well formed.
var ErrBadSkip = errors.New("replpart: malformed cursor skip message")

// SkipRangeError refuses a skip below the cursor's start (a cursor does not keep what it
// finished, so its start only moves forward) or past the log's end when the entry applied.
type SkipRangeError struct{ To, Start, End int64 }

func (e *SkipRangeError) Error() string {
	if e.To < e.Start {
		return fmt.Sprintf("replpart: offset %d is below the subscription's start %d: a start moves forward only", e.To, e.Start)
	}
	return fmt.Sprintf("replpart: offset %d is past the partition's end %d", e.To, e.End)
}

// BelowStart reports whether the offset was below the start (else it was past the end).
func (e *SkipRangeError) BelowStart() bool { return e.To < e.Start }

// skipTo is the SkipTo entry applied: everything in [floor, to) is finished (receipts of
// what was in flight there go stale) and reading goes on at to.
func (sc *subCursor) skipTo(rl RecordLog, to int64) (CursorResult, error) {
	floor := sc.cur.Floor()
	_, end := rl.Bounds()
	if to < floor || to > end {
		return CursorResult{Err: &SkipRangeError{To: to, Start: floor, End: end}}, nil
	}
	if to > floor {
		if err := sc.cur.Apply(queue.Skipped{From: floor, To: to}); err != nil {
			return CursorResult{}, fmt.Errorf("skip to %d: %w", to, err)
		}
	}
	sc.cur.Skip(to)
	return CursorResult{}, nil
}

// SkipCursor moves subscription sub's start forward to offset, on this node if it leads.
// Errors: *SkipRangeError, ErrCursorNotFound, and Append's.
func (p *Partition) SkipCursor(ctx context.Context, sub uint64, offset int64) error {
	_, err := p.cursor(ctx, CursorEntry{Sub: sub, Kind: CursorSkipTo, To: offset})
	return err
}

// RequestSkip asks node to skip subscription sub's cursor of group g to offset (node must
// not be this one: call SkipCursor there). Errors as SkipCursor's: *NotLeaderError when node
// does not lead, *SkipRangeError, ErrCursorNotFound; anything else (a transport failure, an
// unknown outcome) means the skip may or may not have applied.
func RequestSkip(ctx context.Context, h *multiraft.Host, node multiraft.NodeID, g multiraft.GroupID, sub uint64, offset int64) error {
	resp, err := h.Request(ctx, node, g, encodeSkipRequest(sub, offset))
	if err != nil {
		return err
	}
	return decodeSkipResponse(resp, offset)
}

func encodeSkipRequest(sub uint64, to int64) []byte {
	b := []byte{pullVersion, skipKind}
	b = binary.AppendUvarint(b, sub)
	return binary.AppendUvarint(b, uint64(to))
}

func decodeSkipRequest(b []byte) (sub uint64, to int64, err error) {
	if len(b) < 2 || b[0] != pullVersion || b[1] != skipKind {
		return 0, 0, fmt.Errorf("%w: header", ErrBadSkip)
	}
	v, err := uvarints(b[2:], 2, ErrBadSkip)
	if err != nil {
		return 0, 0, err
	}
	if v[1] > math.MaxInt64 {
		return 0, 0, fmt.Errorf("%w: offset %d", ErrBadSkip, v[1])
	}
	return v[0], int64(v[1]), nil
}

func encodeSkipResponse(status byte, a, b int64) []byte {
	out := []byte{pullVersion, status}
	out = binary.AppendUvarint(out, uint64(max(a, 0)))
	return binary.AppendUvarint(out, uint64(max(b, 0)))
}

// decodeSkipResponse turns an answer to a skip to offset back into SkipCursor's error.
func decodeSkipResponse(b []byte, offset int64) error {
	if len(b) < 2 || b[0] != pullVersion {
		return fmt.Errorf("%w: header", ErrBadSkip)
	}
	v, err := uvarints(b[2:], 2, ErrBadSkip)
	if err != nil {
		return err
	}
	if v[0] > math.MaxInt64 || v[1] > math.MaxInt64 {
		return fmt.Errorf("%w: values %d, %d", ErrBadSkip, v[0], v[1])
	}
	switch b[1] {
	case skipDone:
		return nil
	case skipNotLeader:
		return &NotLeaderError{Leader: multiraft.NodeID(v[0])}
	case skipOutOfRange:
		return &SkipRangeError{To: offset, Start: int64(v[0]), End: int64(v[1])}
	case skipNoCursor:
		return ErrCursorNotFound
	}
	return fmt.Errorf("%w: status %d", ErrBadSkip, b[1])
}

// uvarints reads exactly n uvarints, the whole of b; bad is the error of anything else.
func uvarints(b []byte, n int, bad error) ([]uint64, error) {
	v := make([]uint64, n)
	for i := range v {
		x, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, fmt.Errorf("%w: field %d", bad, i)
		}
		v[i], b = x, b[k:]
	}
	if len(b) > 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", bad, len(b))
	}
	return v, nil
}

// serveSkip proposes a peer's skip through this node's Partition, as its own would be.
func (m *Machine) serveSkip(req []byte) ([]byte, error) {
	sub, to, err := decodeSkipRequest(req)
	if err != nil {
		return nil, err
	}
	p := m.api.Load()
	if p == nil { // the group is open, its API not made yet: the requester asks again
		return encodeSkipResponse(skipNotLeader, 0, 0), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), skipTimeout)
	defer cancel()
	err = p.SkipCursor(ctx, sub, to)
	var nl *NotLeaderError
	var re *SkipRangeError
	switch {
	case err == nil:
		return encodeSkipResponse(skipDone, 0, 0), nil
	case errors.As(err, &nl):
		return encodeSkipResponse(skipNotLeader, int64(nl.Leader), 0), nil
	case errors.As(err, &re):
		return encodeSkipResponse(skipOutOfRange, re.Start, re.End), nil
	case errors.Is(err, ErrCursorNotFound):
		return encodeSkipResponse(skipNoCursor, 0, 0), nil
	}
	return nil, err
}
