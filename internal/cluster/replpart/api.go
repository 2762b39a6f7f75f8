package replpart

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/replcursor"
)

// ErrNotLeader is matched (errors.Is) by every *NotLeaderError.
var ErrNotLeader = errors.New("replpart: NOT_LEADER_OR_FOLLOWER")

// ErrOutcomeUnknown: the batches may or may not be stored (the caller's context ended, the
// host stopped, or this node lost sight of the entry). The client retries; an idempotent
// producer's retry is deduplicated by the log, anyone else's may be stored twice.
var ErrOutcomeUnknown = errors.New("replpart: outcome unknown")

// ErrBadAppend: an Append this package refuses before proposing (nothing is stored).
var ErrBadAppend = errors.New("replpart: bad append")

// MaxEntryBytes bounds one Append's encoded entry. Raft refuses proposals past 64 MiB of
// uncommitted log per group; one produce is far below it (Kafka's default
// message.max.bytes is about 1 MiB per batch).
const MaxEntryBytes = 16 << 20

// NotLeaderError: this node does not lead the partition's group. Leader is the node it
// believes does (0: unknown, an election is on): the client retries there.
type NotLeaderError struct{ Leader multiraft.NodeID }

func (e *NotLeaderError) Error() string {
	if e.Leader == 0 {
		return "replpart: NOT_LEADER_OR_FOLLOWER (leader unknown)"
	}
	return fmt.Sprintf("replpart: NOT_LEADER_OR_FOLLOWER (leader is node %d)", e.Leader)
}

func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// Partition is the client-facing API of one replicated partition on one node.
type Partition struct {
	host  *multiraft.Host
	group multiraft.GroupID
	sm    *Machine
	seq   atomic.Uint64
	clock func() time.Time                      // stamps cursor entries (cursor_api.go); nil: time.Now
	admit atomic.Pointer[func(EntryKind) error] // levels.go
}

// NewPartition serves group g's partition, whose state machine on this host is m.
// Request numbers start at a random point, so an entry of a previous process that a
// restart re-applies never carries a request number this one hands out (results are also
// keyed by log index: this is the second fence, as the catalog's).
func NewPartition(h *multiraft.Host, g multiraft.GroupID, m *Machine) *Partition {
	p := &Partition{host: h, group: g, sm: m}
	p.seq.Store(rand.Uint64() >> 1)
	m.api.Store(p)
	return p
}

// Append proposes batches as one entry and returns once committed and applied here, with the
// results Apply computed. Errors: *NotLeaderError{Leader} (errors.Is ErrNotLeader) when this node
// does not lead (Leader 0 = unknown), ErrOutcomeUnknown (may or may not be stored: the client
// retries, and an idempotent producer's retry is deduplicated), ErrProposalDropped-wrapped (not stored).
func (p *Partition) Append(ctx context.Context, batches [][]byte) ([]BatchResult, error) {
	c, err := p.start(batches)
	if err != nil {
		return nil, err
	}
	if err := c.wait(ctx); err != nil {
		return nil, err
	}
	return p.finish(c)
}

// Leader: who leads the group as this node sees it, its term (the Kafka leader epoch).
func (p *Partition) Leader() (multiraft.NodeID, uint64) {
	st, err := p.host.Status(p.group)
	if err != nil {
		return 0, 0
	}
	return st.Leader, st.Term
}

// call is a proposal of this package (an Append, a cursor entry, a trim) not yet answered.
type call struct {
	p   *multiraft.Proposal
	req uint64
}

// wait returns once the proposal is resolved, or with ErrOutcomeUnknown when ctx ends
// first (the entry may still be applied).
func (c *call) wait(ctx context.Context) error {
	select {
	case <-c.p.Done():
		return nil
	case <-ctx.Done():
		select {
		case <-c.p.Done():
			return nil
		default:
			return fmt.Errorf("%w: %w", ErrOutcomeUnknown, ctx.Err())
		}
	}
}

// take is a resolved proposal's result that this node's apply kept in rs.
func take[T any](c *call, rs *replcursor.Results[T]) (T, error) {
	var zero T
	index, err := c.p.Result()
	if err != nil {
		return zero, mapErr(err)
	}
	r, ok := rs.Take(index, c.req)
	if !ok {
		return zero, fmt.Errorf("%w: entry %d applied without this node's result", ErrOutcomeUnknown, index)
	}
	return r, nil
}

func (p *Partition) start(batches [][]byte) (*call, error) {
	if len(batches) == 0 {
		return nil, fmt.Errorf("%w: no batch", ErrBadAppend)
	}
	for i, b := range batches {
		if len(b) == 0 {
			return nil, fmt.Errorf("%w: batch %d is empty", ErrBadAppend, i)
		}
	}
	if err := p.admitted(ProduceEntry); err != nil {
		return nil, err
	}
	e := Entry{Origin: uint64(p.host.Node()), Request: p.seq.Add(1), Batches: batches}
	if n := e.Size(); n > MaxEntryBytes {
		return nil, fmt.Errorf("%w: %d bytes (max %d)", ErrBadAppend, n, MaxEntryBytes)
	}
	// Encoded once, into the buffer raft gets: room for the host's header in front, the
	// exact size behind it (the batches are the entry's bulk; every copy is the whole produce).
	buf := make([]byte, multiraft.ProposalHeadroom, multiraft.ProposalHeadroom+e.Size())
	pr, err := p.host.ProposeAsyncOwned(p.group, e.Encode(buf))
	if err != nil {
		return nil, mapErr(err)
	}
	return &call{p: pr, req: e.Request}, nil
}

// finish reads an Append's results once it is done.
func (p *Partition) finish(c *call) ([]BatchResult, error) { return take(c, &p.sm.results) }

// mapErr turns the host's errors into the partition's: NOT_LEADER with the hint, dropped
// (not stored, safe to retry) as it is, and "outcome unknown" for everything after which
// the entry may still be committed.
func mapErr(err error) error {
	var nl *multiraft.NotLeaderError
	switch {
	case errors.As(err, &nl):
		return &NotLeaderError{Leader: nl.Leader}
	case errors.Is(err, multiraft.ErrProposalDropped):
		return err
	case errors.Is(err, multiraft.ErrOutcomeUnknown), errors.Is(err, multiraft.ErrStopped),
		errors.Is(err, multiraft.ErrRemoved):
		return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
	}
	return err
}
