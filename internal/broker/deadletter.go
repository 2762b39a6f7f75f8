package broker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/sluice-mq/sluice/internal/queue"
)

// splitDeadLetters takes the DeadLettered events out of evs. They are
// journaled only after the dead-letter copy is durable: a crash in between
// dead-letters the message again (at most duplicated, never lost).
func splitDeadLetters(evs []queue.Event) (rest []queue.Event, dead []queue.DeadLettered) {
	rest = evs[:0:0]
	for _, ev := range evs {
		if d, ok := ev.(queue.DeadLettered); ok {
			dead = append(dead, d)
			continue
		}
		rest = append(rest, ev)
	}
	return rest, dead
}

// deadLetter copies messages to the queue's dead-letter queue, keeping their
// id, body, attributes and history, then journals that they left this queue.
// It runs without q.mu: two queues that are each other's dead-letter queue
// must not wait on each other's locks.
func (q *queueRT) deadLetter(ctx context.Context, dead []queue.DeadLettered) error {
	target := q.settings().DeadLetterQueue
	dlq, err := q.b.queue(target)
	if err != nil {
		return q.abandonDeadLetters(fmt.Errorf("dead-letter queue of %s: %w", q.name, err))
	}
	offs := make([]int64, len(dead))
	for i, d := range dead {
		offs[i] = d.Offset
	}
	msgs, err := readMessages(q.log, offs)
	if err != nil {
		return q.abandonDeadLetters(err)
	}
	in := make([]SendInput, len(dead))
	keep := make([]*Message, len(dead))
	for i, d := range dead {
		m := msgs[d.Offset]
		m.DeadLetter = &DeadLetterInfo{SourceQueue: q.name, ReceiveCount: d.Count,
			FirstReceiveAt: d.FirstAt, LastReceiveAt: d.LastAt, Reason: d.Reason}
		in[i] = dlqInput(m, dlq, q.queueRecord(d.Offset))
		keep[i] = m
	}
	res, err := dlq.send(ctx, in, keep)
	if err == nil {
		for _, r := range res {
			if r.Err != nil {
				err = r.Err
				break
			}
		}
	}
	if err != nil {
		return q.abandonDeadLetters(fmt.Errorf("copy to dead-letter queue %s: %w", target, err))
	}
	evs := make([]queue.Event, len(dead))
	for i, d := range dead {
		evs[i] = d
	}
	q.mu.Lock()
	done := q.recordLocked(evs)
	q.mu.Unlock()
	return q.wait(done)
}

// abandonDeadLetters handles a failed dead-letter copy: the cursor already
// treats the messages as finished, so memory is ahead of disk and the queue
// must reload (the messages then come back, with their receive counts).
func (q *queueRT) abandonDeadLetters(err error) error {
	q.mu.Lock()
	q.broken = err
	q.mu.Unlock()
	return err
}

// dlqInput makes the send input of a dead-letter (or redriven) copy of m,
// the record named by from (see copyDedupID). A FIFO target needs a group and
// a dedup id: the source's group, or the source queue's name, and a dedup id
// derived from m's id and from, so a copy sent again after a crash is dropped
// but a later copy of the same message (dead-lettered again after a redrive)
// is not.
func dlqInput(m *Message, target *queueRT, from string) SendInput {
	in := SendInput{Body: m.Body, Attributes: m.Attributes, System: m.System, NoDelay: true}
	fifo := target.settings().FIFO
	if fifo {
		in.GroupID, in.DedupID = m.GroupID, copyDedupID(m.ID, from)
		if in.GroupID == "" && m.DeadLetter != nil {
			in.GroupID = m.DeadLetter.SourceQueue
		}
	}
	return in
}

// copyDedupID is the dedup id of a copy of message id made from the record
// from names ("queue <id>@<offset>", "subscription <key>/<partition>@<offset>"):
// the same for every retry of one copy, different for the next copy of the
// message, which comes from another record. Hashed, so it fits the 128
// characters a dedup id may have whatever the names.
func copyDedupID(id, from string) string {
	sum := sha256.Sum256([]byte(id + "\x00" + from))
	return "copy-" + hex.EncodeToString(sum[:16])
}

// queueRecord names a record of queue q for copyDedupID.
func (q *queueRT) queueRecord(offset int64) string {
	return fmt.Sprintf("queue %d@%d", q.settings().ID, offset)
}
