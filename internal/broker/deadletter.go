package broker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/sluice-mq/sluice/internal/queue"
)

// cursorDead is a dead-letter decision of cursor cursor.
type cursorDead struct {
	cursor int
	d      queue.DeadLettered
}

// splitDeadLetters takes the DeadLettered events out of recs. They are
// journaled only after the dead-letter copy is durable: a crash in between
// dead-letters the message again (at most duplicated, never lost).
func splitDeadLetters(recs []cursorEvent) (rest []cursorEvent, dead []cursorDead) {
	rest = recs[:0:0]
	for _, r := range recs {
		if d, ok := r.ev.(queue.DeadLettered); ok {
			dead = append(dead, cursorDead{r.cursor, d})
			continue
		}
		rest = append(rest, r)
	}
	return rest, dead
}

// deadLetterCopy is one message to copy to a dead-letter queue, and the
// record it is copied from (see copyDedupID); msg is nil for a message
// whose record the log no longer holds (a damaged batch), which is lost.
type deadLetterCopy struct {
	msg  *Message
	from string
}

// deadLetter copies messages that used up their receives to the dead-letter
// queue target, keeping their id, body, attributes and history (build makes
// them from the cursors' decisions), then journals that they left the set.
// It runs without mu: two queues that are each other's dead-letter queue
// must not wait on each other's locks.
//
// If the copy fails, the cursors already treat the messages as finished, so
// memory is ahead of disk: the set is marked broken and reloads, and the
// messages come back with their receive counts, to be dead-lettered again
// by a later receive. Nothing is dropped.
func (cs *cursorSet) deadLetter(ctx context.Context, b *Broker, target string, dead []cursorDead,
	build func([]cursorDead) ([]deadLetterCopy, error)) error {
	dlq, err := b.queue(target)
	if err != nil {
		return cs.markBroken(fmt.Errorf("dead-letter queue of %s: %w", cs.what, err))
	}
	copies, err := build(dead)
	if err != nil {
		return cs.markBroken(err)
	}
	var in []SendInput
	var keep []*Message
	var lost []int64
	for i, c := range copies {
		if c.msg == nil { // its record is in a damaged batch: nothing to copy
			lost = append(lost, dead[i].d.Offset)
			continue
		}
		in, keep = append(in, dlqInput(c.msg, dlq, c.from)), append(keep, c.msg)
	}
	if len(lost) > 0 {
		cs.logger.Error("dead letters lost: their records are in a damaged batch of the log (sluice admin corruption lists it)",
			"offsets", lost)
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
		return cs.markBroken(fmt.Errorf("copy to dead-letter queue %s: %w", target, err))
	}
	recs := make([]cursorEvent, len(dead))
	for i, d := range dead {
		recs[i] = cursorEvent{d.cursor, d.d}
		if copies[i].msg == nil {
			recs[i].ev = queue.Skipped{From: d.d.Offset, To: d.d.Offset + 1}
		}
	}
	cs.mu.Lock()
	done := cs.recordLocked(recs)
	cs.mu.Unlock()
	return cs.wait(done)
}

// deadLetterCopies reads a queue's dead letters from its log.
func (q *queueRT) deadLetterCopies(dead []cursorDead) ([]deadLetterCopy, error) {
	offs := make([]int64, len(dead))
	for i, d := range dead {
		offs[i] = d.d.Offset
	}
	msgs, err := readMessages(q.log, offs)
	if err != nil {
		return nil, err
	}
	out := make([]deadLetterCopy, len(dead))
	for i, d := range dead {
		if m := msgs[d.d.Offset]; m != nil { // nil: lost to a damaged batch
			m.DeadLetter = deadLetterInfo(q.name, d.d)
			out[i] = deadLetterCopy{m, q.queueRecord(d.d.Offset)}
		}
	}
	return out, nil
}

func deadLetterInfo(source string, d queue.DeadLettered) *DeadLetterInfo {
	return &DeadLetterInfo{SourceQueue: source, ReceiveCount: d.Count,
		FirstReceiveAt: d.FirstAt, LastReceiveAt: d.LastAt, Reason: d.Reason}
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
