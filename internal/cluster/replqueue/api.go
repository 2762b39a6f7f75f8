package replqueue

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/queue"
)

// ErrNotLeader is matched (errors.Is) by every *NotLeaderError.
var ErrNotLeader = errors.New("replqueue: NOT_LEADER")

// ErrOutcomeUnknown: the command may or may not have been applied (the caller's context
// ended, or this node lost sight of the entry). Only reading the queue can tell; a client
// retries a Send at the risk of a duplicate, as SQS and Kafka clients do.
var ErrOutcomeUnknown = errors.New("replqueue: outcome unknown")

// NotLeaderError: this node does not lead the queue's group. Leader is the node it
// believes does (0: unknown, an election is on): the client retries there.
type NotLeaderError struct{ Leader multiraft.NodeID }

func (e *NotLeaderError) Error() string {
	if e.Leader == 0 {
		return "replqueue: NOT_LEADER (leader unknown)"
	}
	return fmt.Sprintf("replqueue: NOT_LEADER (leader is node %d)", e.Leader)
}

func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// Queue is the client-facing API of one replicated queue on one node. Every call returns
// after its command is committed and applied here, with the result apply computed.
type Queue struct {
	host  *multiraft.Host
	group multiraft.GroupID
	sm    *Machine
	clock func() time.Time
	seq   atomic.Uint64
	admit atomic.Pointer[func(Op) error] // levels.go
}

// NewQueue serves group's queue, whose state machine on this host is sm. clock is the
// node's wall clock (time.Now in production), read only to stamp proposals.
func NewQueue(h *multiraft.Host, group multiraft.GroupID, sm *Machine, clock func() time.Time) *Queue {
	return &Queue{host: h, group: group, sm: sm, clock: clock}
}

// SendOptions are a Send's optional fields.
type SendOptions struct {
	Attrs []Attr
	Delay time.Duration
}

// Send appends a message and returns its offset.
func (q *Queue) Send(ctx context.Context, body []byte, o SendOptions) (int64, error) {
	r, err := q.do(ctx, Command{Op: OpSend, Body: body, Attrs: o.Attrs, Delay: o.Delay})
	return r.Offset, err
}

// Receive hands out up to max visible messages, hidden for visibility (0: the queue's).
func (q *Queue) Receive(ctx context.Context, max int, visibility time.Duration) ([]Delivery, error) {
	r, err := q.do(ctx, Command{Op: OpReceive, Max: max, Timeout: visibility})
	return r.Deliveries, err
}

// Ack finishes the message a receipt names; a stale receipt is queue.ErrReceiptStale.
func (q *Queue) Ack(ctx context.Context, receipt string) error {
	_, err := q.do(ctx, Command{Op: OpAck, Receipt: receipt})
	return err
}

// Nack makes the message visible again after delay.
func (q *Queue) Nack(ctx context.Context, receipt string, delay time.Duration) error {
	_, err := q.do(ctx, Command{Op: OpNack, Receipt: receipt, Delay: delay})
	return err
}

// NackReason is Nack saying why (OpNackReason): the reason a dead-letter copy of the
// message carries if this was its last nack. Cut to queue.MaxReasonLen bytes.
func (q *Queue) NackReason(ctx context.Context, receipt string, delay time.Duration, reason string) error {
	_, err := q.do(ctx, Command{Op: OpNackReason, Receipt: receipt, Delay: delay, Reason: clipReason(reason)})
	return err
}

// clipReason cuts a nack reason to queue.MaxReasonLen bytes, not inside a UTF-8 sequence:
// a longer one would make an entry no replica decodes.
func clipReason(s string) string {
	n := queue.MaxReasonLen
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Extend hides the message for d from now.
func (q *Queue) Extend(ctx context.Context, receipt string, d time.Duration) error {
	_, err := q.do(ctx, Command{Op: OpExtend, Receipt: receipt, Timeout: d})
	return err
}

func (q *Queue) do(ctx context.Context, c Command) (Result, error) {
	call, err := q.start(c)
	if err != nil {
		return Result{}, err
	}
	select {
	case <-call.p.Done():
	case <-ctx.Done():
		select {
		case <-call.p.Done():
		default:
			return Result{}, fmt.Errorf("%w: %w", ErrOutcomeUnknown, ctx.Err())
		}
	}
	return q.finish(call)
}

// call is a command proposed and not yet answered.
type call struct {
	p   *multiraft.Proposal
	req uint64
}

// start stamps c with this node's clock and proposes it. A leader whose clock runs behind
// the queue's latest applied time stamps that time instead: time stands still for the
// queue until the new leader's clock catches up, so no deadline ever moves back.
func (q *Queue) start(c Command) (*call, error) {
	if (c.Op == OpReceive || c.Op == OpReceiveLimited) && (c.Max <= 0 || c.Max > MaxReceive) {
		return nil, fmt.Errorf("replqueue: receive max %d (1..%d)", c.Max, MaxReceive)
	}
	if len(c.Body) > MaxBody {
		return nil, fmt.Errorf("replqueue: body of %d bytes (max %d)", len(c.Body), MaxBody)
	}
	if err := q.admitted(c.Op); err != nil {
		return nil, err
	}
	c.Origin = uint64(q.host.Node())
	c.Request = q.seq.Add(1)
	c.Now = q.clock().UTC()
	if last := q.sm.Now(); c.Now.Before(last) {
		c.Now = last
	}
	data := c.Encode(nil)
	// Every replica decodes the entry with Decode's limits and stops the group on one it
	// refuses (it cannot skip it): a receipt, attribute or duration out of those limits
	// must be refused here, before it is in the log.
	if _, err := Decode(data); err != nil {
		return nil, fmt.Errorf("replqueue: refused before proposing: %w", err)
	}
	p, err := q.host.ProposeAsync(q.group, data)
	if err != nil {
		return nil, mapErr(err)
	}
	return &call{p: p, req: c.Request}, nil
}

// finish reads a proposal's result once it is done.
func (q *Queue) finish(c *call) (Result, error) {
	index, err := c.p.Result()
	if err != nil {
		return Result{}, mapErr(err)
	}
	r, ok := q.sm.take(index, c.req)
	if !ok {
		return Result{}, fmt.Errorf("%w: entry %d applied without this node's result", ErrOutcomeUnknown, index)
	}
	return r, r.Err
}

// mapErr turns the host's errors into the queue's: NOT_LEADER with the hint, and
// "outcome unknown" for everything after which the entry may still be committed.
func mapErr(err error) error {
	var nl *multiraft.NotLeaderError
	switch {
	case errors.As(err, &nl):
		return &NotLeaderError{Leader: nl.Leader}
	case errors.Is(err, multiraft.ErrProposalDropped):
		return err // not applied: safe to retry
	case errors.Is(err, multiraft.ErrOutcomeUnknown), errors.Is(err, multiraft.ErrStopped):
		return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
	}
	return err
}
