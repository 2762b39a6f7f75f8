package broker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/sluice-mq/sluice/internal/queue"
)

// deadLetter copies records that ran out of receives to the subscription's
// dead-letter queue, then journals that they left the subscription; as for
// queues (deadletter.go), a crash in between copies them again, never loses
// them. It runs without sub.mu.
func (sub *subRT) deadLetter(ctx context.Context, parts []*partitionRT, dead []partDead) error {
	sub.mu.Lock()
	target := sub.settings.DeadLetterQueue
	source := subKey(sub.t.name, sub.settings.Name)
	sub.mu.Unlock()
	dlq, err := sub.t.s.b.queue(target)
	if err != nil {
		return sub.abandon(fmt.Errorf("dead-letter queue of %s: %w", source, err))
	}
	in := make([]SendInput, len(dead))
	keep := make([]*Message, len(dead))
	for i, d := range dead {
		m, err := sub.deadLetterMessage(parts[d.p], source, d)
		if err != nil {
			return sub.abandon(err)
		}
		in[i], keep[i] = dlqInput(m, dlq, fmt.Sprintf("subscription %s/%d@%d", source, d.p, d.d.Offset)), m
	}
	res, err := dlq.send(ctx, in, keep)
	if err != nil {
		return sub.abandon(fmt.Errorf("copy to dead-letter queue %s: %w", target, err))
	}
	for i, r := range res {
		if r.Err != nil {
			// The queue refused this record for good (larger than its
			// maximum message size): retrying would loop forever, so it
			// leaves the subscription anyway, loudly.
			sub.t.s.b.log.Error("dead-letter queue refused a record; it is dropped", "subscription", source,
				"partition", dead[i].p, "offset", dead[i].d.Offset, "err", r.Err)
		}
	}
	var recs []subEvent
	for _, d := range dead {
		recs = append(recs, subEvent{d.p, queue.Event(d.d)})
	}
	sub.mu.Lock()
	done := sub.recordLocked(recs)
	sub.mu.Unlock()
	return sub.wait(done)
}

// deadLetterMessage makes the dead-letter queue's message of a record.
func (sub *subRT) deadLetterMessage(p *partitionRT, source string, d partDead) (*Message, error) {
	recs, err := readRecords(p, []int64{d.d.Offset})
	if err != nil {
		return nil, err
	}
	r := recs[d.d.Offset]
	m := &Message{
		// A stable id: a copy repeated after a crash is deduplicated by a
		// FIFO dead-letter queue.
		ID:   stableID(source, d.p, d.d.Offset),
		Body: r.Value,
		System: map[string]string{
			"sluice.topic": sub.t.name, "sluice.partition": strconv.Itoa(d.p),
			"sluice.offset": strconv.FormatInt(d.d.Offset, 10), "sluice.key": string(r.Key),
		},
		SentAt: d.d.SentAt,
		DeadLetter: &DeadLetterInfo{SourceQueue: source, ReceiveCount: d.d.Count,
			FirstReceiveAt: d.d.FirstAt, LastReceiveAt: d.d.LastAt, Reason: d.d.Reason},
	}
	if len(r.Headers) > 0 {
		m.Attributes = make(map[string]Attribute, len(r.Headers))
		for _, h := range r.Headers {
			m.Attributes[h.Key] = Attribute{DataType: "Binary", Value: h.Value}
		}
	}
	if m.Body == nil {
		m.Body = []byte{}
	}
	return m, nil
}

// stableID names a dead-lettered record the same way every time.
func stableID(source string, p int, off int64) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%d/%d", source, p, off)))
	return hex.EncodeToString(sum[:16])
}

// abandon handles a failed dead-letter copy: the cursor already treats the
// records as finished, so it reloads from the journal (they come back with
// their receive counts).
func (sub *subRT) abandon(err error) error {
	sub.mu.Lock()
	sub.broken = err
	sub.mu.Unlock()
	return err
}
