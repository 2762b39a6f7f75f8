package broker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/queue"
)

// SendResult is the outcome of one message of a Send.
type SendResult struct {
	ID        string
	Sequence  int64 // the message's offset in the queue's log
	Duplicate bool  // FIFO: the dedup id was seen within the window; nothing was stored
	Err       error // this message was refused (invalid); the others were not affected
}

// SendInput is one message to send: the Message fields a producer sets, and
// a delay (0: the queue's default delay; use NoDelay for none).
type SendInput struct {
	Body       []byte
	Attributes map[string]Attribute
	System     map[string]string
	GroupID    string
	DedupID    string
	Delay      time.Duration
	NoDelay    bool // ignore the queue's default delay
}

// Send stores messages in a queue and returns once they are durable. Each
// input gets a result; an invalid one is refused alone (as SQS's batch
// partial failure), and the call's error is for the queue as a whole.
func (b *Broker) Send(ctx context.Context, queueName string, in []SendInput) ([]SendResult, error) {
	if b.cluster != nil && b.cluster.clusteredQueue(queueName) {
		return b.cluster.sendQueue(ctx, queueName, in)
	}
	q, err := b.queue(queueName)
	if err != nil {
		return nil, err
	}
	if err := b.disk.Admit(); err != nil {
		return nil, err
	}
	return q.send(ctx, in, nil)
}

// send stores inputs; dl, when not nil, carries dead-letter metadata per input
// (dead-lettering and redrive use it to keep a message's id and history).
func (q *queueRT) send(ctx context.Context, in []SendInput, keep []*Message) ([]SendResult, error) {
	s := *q.settings()
	if s.FIFO {
		q.sendMu.Lock()
		defer q.sendMu.Unlock()
	}
	now := q.now()
	results := make([]SendResult, len(in))
	var msgs []*Message
	var idx []int
	batchDedup := map[string]int{} // dedup id -> index in msgs
	dupOf := map[int]int{}         // input index -> input index it repeats
	for i, m := range in {
		copied := keep != nil && keep[i] != nil
		msg, err := q.prepare(s, m, now, copied)
		if err == nil && copied {
			msg.ID, msg.DeadLetter, msg.SentAt = keep[i].ID, keep[i].DeadLetter, keep[i].SentAt
		}
		if err != nil {
			results[i].Err = err
			continue
		}
		if s.FIFO {
			key := dedupKey(s, msg.GroupID, msg.DedupID)
			if id, seen := q.checkDedup(now, key); seen {
				results[i] = SendResult{ID: id, Duplicate: true, Sequence: -1}
				continue
			}
			if k, seen := batchDedup[key]; seen { // repeated within this call
				results[i] = SendResult{ID: msgs[k].ID, Duplicate: true, Sequence: -1}
				dupOf[i] = idx[k]
				continue
			}
			batchDedup[key] = len(msgs)
		}
		results[i].ID = msg.ID
		msgs = append(msgs, msg)
		idx = append(idx, i)
	}
	if len(msgs) == 0 {
		return results, nil
	}
	if !s.FIFO {
		first, err := q.appendGrouped(ctx, msgs, now)
		if err != nil {
			return nil, err
		}
		for k, i := range idx {
			results[i].Sequence = first + int64(k)
		}
		return results, nil
	}
	batches, err := encodeMessageBatches(msgs, now)
	if err != nil {
		return nil, err
	}
	offs, err := q.log.Append(ctx, batches...) // consecutive offsets, one group commit
	if err != nil {
		return nil, fmt.Errorf("send to %s: %w", q.name, q.b.disk.Note(err))
	}
	q.mu.Lock()
	for k, i := range idx {
		results[i].Sequence = offs[0] + int64(k)
		if s.FIFO {
			q.dedup.Record(now, dedupKey(s, msgs[k].GroupID, msgs[k].DedupID), msgs[k].ID)
		}
	}
	done := q.journalLocked(q.cacheSentLocked(offs[0], msgs, now))
	q.notifyLocked()
	q.mu.Unlock()
	if err := q.wait(done); err != nil {
		return nil, fmt.Errorf("send to %s: %w", q.name, err)
	}
	for i, orig := range dupOf {
		results[i].Sequence = results[orig].Sequence
	}
	return results, nil
}

// dedupKey is what a FIFO queue deduplicates on: the deduplication id,
// within the message's group when the scope is the group.
func dedupKey(s QueueSettings, group, dedup string) string {
	if s.DedupScope == DedupScopeGroup {
		return group + "\x00" + dedup
	}
	return dedup
}

func (q *queueRT) checkDedup(now time.Time, id string) (string, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dedup.Check(now, id)
}

// prepare validates one input against the queue's settings and builds the
// message to store. A copy (a dead letter, a redriven message) is not held to
// the queue's maximum message size: it was accepted once, and refusing it
// now would lose it, or leave it coming back to be dead-lettered forever.
func (q *queueRT) prepare(s QueueSettings, in SendInput, now time.Time, copied bool) (*Message, error) {
	m := &Message{ID: newMessageID(), Body: in.Body, Attributes: in.Attributes, System: in.System,
		GroupID: in.GroupID, DedupID: in.DedupID, SentAt: now}
	if n := m.size(); n > s.MaxMessageBytes && !copied {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrMessageTooLarge, n, s.MaxMessageBytes)
	}
	delay := in.Delay
	if delay == 0 && !in.NoDelay {
		delay = s.DefaultDelay
	}
	if delay < 0 || delay > s.Retention {
		return nil, invalid("delay", "%v: want 0 to the retention period %v", delay, s.Retention)
	}
	if delay > 0 {
		m.AvailableAt = now.Add(delay)
	}
	if !s.FIFO {
		if m.GroupID != "" {
			return nil, invalid("group_id", "message groups are for FIFO queues only")
		}
		m.DedupID = "" // standard queues do not deduplicate, as in SQS
		return m, nil
	}
	if m.GroupID == "" {
		return nil, invalid("group_id", "a FIFO queue needs a message group id")
	}
	if len(m.GroupID) > 128 || len(m.DedupID) > 128 {
		return nil, invalid("group_id", "group and deduplication ids are at most 128 characters")
	}
	if m.DedupID == "" {
		if !s.ContentBasedDedup {
			return nil, invalid("dedup_id", "the queue has no content-based deduplication, so a deduplication id is required")
		}
		sum := sha256.Sum256(m.Body)
		m.DedupID = hex.EncodeToString(sum[:])
	}
	return m, nil
}

// rebuildDedup remembers the dedup ids of the messages sent within the last
// window, read back from the log, so a retry across a restart is still
// recognised.
func (q *queueRT) rebuildDedup() error {
	d, err := q.loadDedup(*q.settings())
	if err == nil {
		q.dedup = d
	}
	return err
}

// loadDedup reads the dedup ids of the messages sent within s's window
// back from the log, keyed as s deduplicates.
func (q *queueRT) loadDedup(s QueueSettings) (*queue.Deduper, error) {
	d, err := queue.NewDeduper(s.DedupWindow)
	if err != nil {
		return nil, err
	}
	now := q.now()
	from, err := q.log.OffsetForTime(now.Add(-s.DedupWindow).UnixMilli())
	if err != nil || from < 0 {
		return d, err // from < 0: nothing sent within the window
	}
	for pos := from; pos < q.log.HighWatermark(); {
		data, err := q.log.Read(pos, fillReadBytes)
		if err != nil {
			return nil, err
		}
		next := pos
		err = eachRecord(data, func(r batch.Record) bool {
			next = r.Offset + 1
			if r.Offset < pos {
				return true
			}
			var id, group, dedup string
			for _, h := range r.Headers {
				switch h.Key {
				case hdrID:
					id = string(h.Value)
				case hdrGroup:
					group = string(h.Value)
				case hdrDedup:
					dedup = string(h.Value)
				}
			}
			if dedup != "" {
				d.Record(time.UnixMilli(r.Timestamp), dedupKey(s, group, dedup), id)
			}
			return true
		})
		if err != nil {
			return nil, err
		}
		if next == pos {
			break
		}
		pos = next
	}
	return d, nil
}
