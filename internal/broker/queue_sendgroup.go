package broker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/internal/queue"
)

// sendGroups combines the concurrent sends of a standard queue into one
// append each: one log write and one fdatasync (storage's group commit did
// that already), but also one pass under the queue's lock to cache, offer
// and wake the long-polls, instead of one per send.
//
// Why: with a front-end that sends one message a request (SQS SendMessage,
// 256 in flight), every fdatasync released a dozen senders at once, and each
// of them then queued for storage's append lock and for q.mu, the lock every
// receive and delete needs too, and closed q.wake, waking every idle
// long-poll again for a single message. On a machine short of CPU, each of
// those hand-offs is a trip through the scheduler (mutex profile of W3 over
// SQS: half the contention was senders on q.mu right after their append,
// the other half on storage's append lock).
//
// The first sender that finds no group being written leads: it takes every
// send pending and appends them; once that append is durable it hands the
// lead to the oldest send that queued meanwhile (whose group is appended
// while this one is recorded), records its group in the cursor under one
// hold of q.mu, answers it and returns to its own caller. Durability is unchanged: a send is
// answered only after the append (and any cursor events it caused) is
// durable. FIFO sends do not come here: sendMu already orders them one by
// one with their deduplication.
type sendGroups struct {
	mu      sync.Mutex
	pending []*groupedSend
	leading bool // a group is being written; its leader will hand over
}

// groupedSend is one send call's prepared messages and, once written, where
// they landed.
type groupedSend struct {
	msgs  []*Message
	now   time.Time
	first int64 // offset of msgs[0], once written
	err   error
	// wake gets true when this send is to lead the next group, false once
	// it is written (or failed).
	wake chan bool
}

// appendGrouped stores msgs (prepared by send at now) with the sends of
// other callers, durably, and returns the offset of the first. It does not
// give up when ctx ends: a follower that left could be handed the lead, and
// a group's write is bounded by the disk, as an append's sync is.
func (q *queueRT) appendGrouped(ctx context.Context, msgs []*Message, now time.Time) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	me := &groupedSend{msgs: msgs, now: now, wake: make(chan bool, 1)}
	g := &q.groups
	g.mu.Lock()
	g.pending = append(g.pending, me)
	if g.leading {
		g.mu.Unlock()
		if lead := <-me.wake; !lead {
			return me.first, me.err
		}
		g.mu.Lock() // handed the lead: the group starts with me
	}
	g.leading = true
	group := g.pending
	g.pending = nil
	g.mu.Unlock()

	offs, firstBatch, err := q.appendGroup(group)
	// The next group may append now, while this one is recorded: the
	// cursor takes sends in any order (cacheSentLocked), as it did when
	// every sender took q.mu on its own after its append.
	g.mu.Lock()
	if len(g.pending) > 0 {
		g.pending[0].wake <- true // the oldest waiting send leads the next group
	} else {
		g.leading = false
	}
	g.mu.Unlock()
	if err == nil {
		err = q.recordGroup(group, offs, firstBatch)
	}
	for _, s := range group {
		if s.err == nil && err != nil {
			s.err = err
		}
		if s != me {
			s.wake <- false // buffered: each member hears exactly once
		}
	}
	return me.first, me.err
}

// appendGroup appends the group's messages in one call and returns the
// offsets of its batches; firstBatch[i] is the first batch of group[i], or
// -1 if it failed to encode (its err says why).
func (q *queueRT) appendGroup(group []*groupedSend) (offs []int64, firstBatch []int, err error) {
	var batches [][]byte
	firstBatch = make([]int, len(group))
	for i, s := range group {
		bs, err := encodeMessageBatches(s.msgs, s.now)
		if err != nil {
			s.err, firstBatch[i] = err, -1
			continue
		}
		firstBatch[i] = len(batches)
		batches = append(batches, bs...)
	}
	if len(batches) == 0 {
		return nil, firstBatch, nil
	}
	// Not the leader's context: the append is everyone's.
	offs, err = q.log.Append(context.Background(), batches...)
	if err != nil {
		return nil, firstBatch, fmt.Errorf("send to %s: %w", q.name, q.b.disk.Note(err))
	}
	return offs, firstBatch, nil
}

// recordGroup records the group's durable messages in the cursor under one
// hold of q.mu, wakes the long polls once, and waits for the journal if
// that made events.
func (q *queueRT) recordGroup(group []*groupedSend, offs []int64, firstBatch []int) error {
	var evs []queue.Event
	q.mu.Lock()
	for i, s := range group {
		if firstBatch[i] < 0 {
			continue
		}
		s.first = offs[firstBatch[i]]
		evs = append(evs, q.cacheSentLocked(s.first, s.msgs, s.now)...)
	}
	done := q.journalLocked(evs)
	q.notifyLocked()
	q.mu.Unlock()
	if err := q.wait(done); err != nil {
		return fmt.Errorf("send to %s: %w", q.name, err)
	}
	return nil
}
