package broker

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/replqueue"
	"github.com/sluice-mq/sluice/internal/queue"
)

// replTimeout bounds one replicated command: a commit of the queue's group.
const replTimeout = 10 * time.Second

func (c *clusterRT) sendQueue(ctx context.Context, name string, in []SendInput) ([]SendResult, error) {
	h, s, err := c.leaderQueue(name)
	if err != nil {
		return nil, err
	}
	if err := c.b.disk.Admit(); err != nil { // the leader's disk takes the entry first
		return nil, err
	}
	if s.FIFO {
		return c.sendFIFO(ctx, h, s, in)
	}
	ctx, cancel := context.WithTimeout(ctx, replTimeout)
	defer cancel()
	// One entry for the whole batch, in the order given: a single node's send keeps a
	// batch's order, and so must a cluster's (one proposal per message, made concurrently,
	// reached the log in any order). No key: a standard queue deduplicates nothing.
	results := make([]SendResult, len(in))
	var msgs []replqueue.Msg
	var idx []int
	for i := range in {
		body, delay, err := envelope(s, &in[i])
		if err != nil {
			results[i].Err = err
			continue
		}
		msgs = append(msgs, replqueue.Msg{Body: body, Delay: delay})
		idx = append(idx, i)
	}
	if len(msgs) == 0 {
		return results, nil
	}
	outs, err := h.q.Put(ctx, msgs, 0)
	switch {
	case errors.Is(err, queue.ErrOutOfRange):
		// A delay past the queue's retention as its replicas hold it (lowered since
		// envelope checked it against the settings read above) refuses the whole entry:
		// send one at a time, in order, so that only that message is refused.
		for k, i := range idx {
			off, err := h.q.Send(ctx, msgs[k].Body, replqueue.SendOptions{Delay: msgs[k].Delay})
			if err != nil {
				results[i].Err = replErr(name, err)
				continue
			}
			results[i] = SendResult{ID: messageID(h.group, off), Sequence: off}
		}
		return results, nil
	case err != nil:
		return nil, replErr(name, err)
	}
	for k, i := range idx {
		results[i] = SendResult{ID: messageID(h.group, outs[k].Offset), Sequence: outs[k].Offset}
	}
	return results, nil
}

// envelope checks one message against the queue's settings as a single node's send does
// and encodes it as a replicated message body: the attributes travel inside the body, so
// replqueue's attribute limits never come into play.
func envelope(s QueueSettings, in *SendInput) ([]byte, time.Duration, error) {
	m := Message{Body: in.Body, Attributes: in.Attributes}
	if n := m.size(); n > s.MaxMessageBytes {
		return nil, 0, fmt.Errorf("%w: %d bytes, limit %d", ErrMessageTooLarge, n, s.MaxMessageBytes)
	}
	if in.GroupID != "" && !s.FIFO {
		return nil, 0, invalid("group_id", "message groups are for FIFO queues only")
	}
	delay := in.Delay
	if delay == 0 && !in.NoDelay {
		delay = s.DefaultDelay
	}
	if delay < 0 || delay > s.Retention {
		return nil, 0, invalid("delay", "%v: want 0 to the retention period %v", delay, s.Retention)
	}
	b := encodeEnvelope(in.Attributes, in.System, in.Body)
	// Room is kept for the copy header of a dead-letter or redriven copy (copyReserve): a
	// message accepted here must fit replqueue's entry as a copy too, or it could never
	// leave the source's dead letters.
	if limit := replqueue.MaxBody - copyReserve; len(b) > limit {
		return nil, 0, fmt.Errorf("%w: %d bytes with its attributes, limit %d in a cluster", ErrMessageTooLarge, len(b), limit)
	}
	return b, delay, nil
}

// messageID names a replicated message: its group and offset, in a UUID's form. Every
// replica computes the same one, and a group id is never reused.
func messageID(g multiraft.GroupID, off int64) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(g))
	binary.BigEndian.PutUint64(b[8:], uint64(off))
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// receiveQueue receives on the leader. With a wait it sleeps until the replica holds
// something deliverable (an apply wakes it), a delay or visibility runs out, the wait
// ends, or ctx ends; it proposes a Receive only when the machine says one can deliver.
func (c *clusterRT) receiveQueue(ctx context.Context, name string, opts ReceiveOptions) ([]Delivery, error) {
	h, s, err := c.leaderQueue(name)
	if err != nil {
		return nil, err
	}
	if opts.Max == 0 {
		opts.Max = 1
	}
	if opts.Max < 0 || opts.Max > replqueue.MaxReceive {
		return nil, invalid("max", "%d: want 1 to %d in a cluster", opts.Max, replqueue.MaxReceive)
	}
	if opts.Wait == WaitQueueDefault {
		opts.Wait = s.ReceiveWait
	}
	if opts.Wait < 0 {
		return nil, invalid("wait", "%v: must not be negative", opts.Wait)
	}
	vis := opts.Visibility
	if vis == 0 {
		vis = s.VisibilityTimeout
	}
	vis = max(vis, time.Nanosecond) // replqueue reads 0 as "the machine's"
	var timeout <-chan time.Time
	if opts.Wait > 0 {
		t := time.NewTimer(opts.Wait)
		defer t.Stop()
		timeout = t.C
	}
	for {
		wake := h.sm.changed()
		if h.sm.Deliverable(c.b.now()) {
			rctx, cancel := context.WithTimeout(ctx, replTimeout)
			ds, dead, err := h.q.ReceiveLimited(rctx, opts.Max, vis, receiveLimit(s))
			cancel()
			if dead > 0 {
				go c.moveDeadLetters(h) // cluster_queues_dlq.go
			}
			if err != nil {
				return nil, replErr(name, err)
			}
			if len(ds) > 0 {
				return c.deliveriesOf(h.group, ds)
			}
		}
		if opts.Wait == 0 {
			return nil, nil
		}
		// Nothing to hand out: wait for an apply, the next due time, or the end. A
		// deposed leader keeps applying, and its next Receive answers NOT_LEADER.
		due := h.sm.Depth().NextDue
		if due.IsZero() {
			due = c.b.now().Add(time.Second) // re-check leadership now and then
		}
		if !waitForWork(ctx, wake, due, c.b.now(), timeout) {
			return nil, ctx.Err()
		}
	}
}

// messageOf is a replicated queue's message as the broker hands it out: its envelope
// opened (attributes, system attributes), and a dead letter's copy header read.
func messageOf(g multiraft.GroupID, rm replqueue.Message) (Message, error) {
	hdr, env, err := unwrapCopy(rm.Body)
	if err != nil {
		return Message{}, fmt.Errorf("queue message %d: %w", rm.Offset, err)
	}
	attrs, sys, body, err := decodeEnvelope(env)
	if err != nil {
		return Message{}, fmt.Errorf("queue message %d: %w", rm.Offset, err)
	}
	m := Message{ID: messageID(g, rm.Offset), Body: body, Attributes: attrs, System: sys,
		SentAt: rm.SentAt, GroupID: rm.Group, DedupID: rm.Dedup}
	if hdr.id != "" {
		m.ID = hdr.id // a copy keeps the message's id, as on a single node
	}
	if hdr.source != "" {
		// The copy was sent when the message was dead-lettered; a version 3 header
		// (history) says when the message itself was, as a single node's record does.
		m.DeadLetter = &DeadLetterInfo{SourceQueue: hdr.source, ReceiveCount: hdr.count, At: rm.SentAt,
			FirstReceiveAt: hdr.firstAt, LastReceiveAt: hdr.lastAt, Reason: hdr.reason}
		if !hdr.sentAt.IsZero() {
			m.SentAt = hdr.sentAt
		}
	}
	return m, nil
}

func (c *clusterRT) deliveriesOf(g multiraft.GroupID, ds []replqueue.Delivery) ([]Delivery, error) {
	out := make([]Delivery, 0, len(ds))
	for _, d := range ds {
		m, err := messageOf(g, d.Message)
		if err != nil {
			return nil, err
		}
		out = append(out, Delivery{
			Message:  m,
			Sequence: d.Offset, Receipt: c.queueReceipt(g, d.Offset, d.FencingToken, d.Receipt), ReceiveCount: d.ReceiveCount,
			FirstReceivedAt: d.FirstReceivedAt, Deadline: d.Deadline, FencingToken: d.FencingToken})
	}
	return out, nil
}

// lease runs one receipt operation on the leader.
func (c *clusterRT) lease(ctx context.Context, name, receipt string, op func(context.Context, *replqueue.Queue, string) error) error {
	h, _, err := c.leaderQueue(name)
	if err != nil {
		return err
	}
	r, err := c.openQueueReceipt(h.group, receipt)
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, replTimeout)
		defer cancel()
		err = replErr(name, op(ctx, h.q, r))
	}
	if errors.Is(err, ErrReceiptStale) {
		h.staleRefused.Add(1)
	}
	return err
}

func (c *clusterRT) ackQueue(ctx context.Context, name, receipt string) error {
	return c.lease(ctx, name, receipt, func(ctx context.Context, q *replqueue.Queue, r string) error {
		return q.Ack(ctx, r)
	})
}

func (c *clusterRT) ackBatchQueue(ctx context.Context, name string, receipts []string) ([]error, error) {
	if _, _, err := c.leaderQueue(name); err != nil {
		return nil, err
	}
	errs := make([]error, len(receipts))
	var wg sync.WaitGroup
	for i, r := range receipts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.ackQueue(ctx, name, r)
		}()
	}
	wg.Wait()
	return errs, nil
}

func (c *clusterRT) extendQueue(ctx context.Context, name, receipt string, d time.Duration) error {
	return c.lease(ctx, name, receipt, func(ctx context.Context, q *replqueue.Queue, r string) error {
		return q.Extend(ctx, r, d)
	})
}

func (c *clusterRT) nackQueue(ctx context.Context, name, receipt string, delay time.Duration, reason string) error {
	// A reason travels only once every node reads OpNackReason; before, it is dropped, as
	// it always was in a cluster.
	withReason := reason != "" && c.meta.State().FeatureLevel() >= meta.LevelDeadLetterHistory
	return c.lease(ctx, name, receipt, func(ctx context.Context, q *replqueue.Queue, r string) error {
		if withReason {
			return q.NackReason(ctx, r, delay, reason)
		}
		return q.Nack(ctx, r, delay)
	})
}

// queueStats reads the leader's replica: the counts as of its last applied command.
func (c *clusterRT) queueStats(name string) (QueueStats, error) {
	h, _, err := c.leaderQueue(name)
	if err != nil {
		return QueueStats{}, err
	}
	d := h.sm.Depth()
	// A dead letter on its way to the dead-letter queue counts as in flight: received, not
	// deleted, not visible.
	st := QueueStats{Name: name, Visible: d.Visible, InFlight: d.InFlight + d.Dead, Delayed: d.Delayed, Sent: uint64(d.Sent),
		Received: d.Received, Redelivered: d.Redelivered, Acked: d.Acked, DeadLettered: d.DeadLettered, Expired: d.Expired,
		StaleRefused: h.staleRefused.Load()}
	if s, err := c.getQueue(name); err == nil && s.DeadLetterQueue != "" {
		if dh := c.hostedQueue(s.DeadLetterQueue); dh != nil {
			dd := dh.sm.Depth() // this node's replica, when it has one: approximate
			st.DLQDepth = dd.Visible + dd.InFlight + dd.Delayed
		}
	}
	if !d.OldestSentAt.IsZero() {
		st.OldestAge = max(c.b.now().Sub(d.OldestSentAt), 0)
	}
	return st, nil
}

// purgeQueue purges on the leader: one entry finishes everything sent before it.
func (c *clusterRT) purgeQueue(ctx context.Context, name string) error {
	h, _, err := c.leaderQueue(name)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, replTimeout)
	defer cancel()
	return replErr(name, h.q.Purge(ctx))
}
