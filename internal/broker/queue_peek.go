package broker

import (
	"errors"
	"time"

	"github.com/sluice-mq/sluice/internal/queue"
	"github.com/sluice-mq/sluice/internal/storage"
)

// Peeking: reading a queue's unfinished messages without receiving them.
//
// A receive changes state (it hides the message, counts a receive, and can
// dead-letter it), so an operator looking into a queue or a dead-letter
// queue must not receive. A peek reads the log from the queue's first
// unfinished message and asks the cursor, read-only (queue.Cursor.Peek),
// where each message stands; finished ones are left out. Nothing is
// journaled, no receipt is made, no counter moves.

// PeekMax bounds the messages one peek returns.
const PeekMax = 100

// peekScanBytes bounds the log one peek reads, so a peek over a long run of
// finished messages above the floor (acks out of order) answers in bounded
// time, with Next saying where to go on.
const peekScanBytes = 16 << 20

// peekFirstReadBytes is a peek's first read of the log: a console page of
// 20 small messages, without copying a fill's 256 KiB.
const peekFirstReadBytes = 32 << 10

// PeekOptions select what PeekQueue returns.
type PeekOptions struct {
	// From is the first offset looked at; below the queue's first
	// unfinished message, from there.
	From int64
	// Max is how many messages to return: 0 is 10, at most PeekMax.
	Max int
}

// PeekedMessage is one unfinished message as a peek sees it.
type PeekedMessage struct {
	Offset  int64
	Message *Message
	// State is queue.PeekState's name: visible, blocked, in_flight, delayed.
	State        string
	ReceiveCount int
	VisibleAt    time.Time // in flight or delayed: when it is visible again
}

// PeekResult is one page of a peek.
type PeekResult struct {
	Messages []PeekedMessage
	// Next is the offset to peek from for the next page; End is the log's
	// end when the peek looked: Next == End means nothing more was there.
	Next, End int64
}

// PeekQueue returns a queue's unfinished messages in offset order, changing
// nothing. A dead-letter queue is a queue: its messages carry DeadLetter.
func (b *Broker) PeekQueue(name string, opts PeekOptions) (PeekResult, error) {
	if opts.Max < 0 || opts.Max > PeekMax || opts.From < 0 {
		return PeekResult{}, invalid("max", "max must be between 1 and 100 and from must not be negative")
	}
	if opts.Max == 0 {
		opts.Max = 10
	}
	if b.cluster != nil && b.cluster.clusteredQueue(name) {
		return b.cluster.peekQueue(name, opts) // cluster_queues_peek.go
	}
	q, err := b.queue(name)
	if err != nil {
		return PeekResult{}, err
	}
	return q.peek(opts.From, opts.Max)
}

// peek reads the log from max(from, floor) until it holds n unfinished
// messages, reaches the end, or has read peekScanBytes.
func (q *queueRT) peek(from int64, n int) (PeekResult, error) {
	q.mu.Lock()
	pos := max(from, q.cur().Floor())
	q.mu.Unlock()
	res := PeekResult{End: q.log.HighWatermark()}
	// A page of a few messages needs a small read; a run of finished ones
	// (or large messages) grows it to a fill's.
	size := peekFirstReadBytes
	for scanned := 0; pos < res.End && len(res.Messages) < n && scanned < peekScanBytes; size = fillReadBytes {
		pos = max(pos, q.log.LogStartOffset())
		data, err := q.log.Read(pos, size)
		if errors.Is(err, storage.ErrOffsetOutOfRange) && pos < q.log.LogStartOffset() {
			continue // retention deleted it meanwhile: on from the new start
		}
		if err != nil {
			return PeekResult{}, err
		}
		scanned += len(data)
		metas, recs, end, err := messageMetas(data, pos)
		if err != nil {
			return PeekResult{}, err
		}
		if len(metas) == 0 {
			if end <= pos { // a damaged range, or nothing yet
				if end = q.log.SkipDamaged(pos); end == pos {
					break
				}
			}
			pos = end
			continue
		}
		states := make([]queue.Peeked, len(metas))
		q.mu.Lock()
		now := q.now()
		for i, m := range metas {
			states[i] = q.cur().Peek(now, m)
		}
		q.mu.Unlock()
		for i, m := range metas {
			if len(res.Messages) == n {
				end = m.Offset
				break
			}
			if s := states[i]; s.State != queue.PeekDone {
				res.Messages = append(res.Messages, PeekedMessage{Offset: m.Offset, Message: recordMessage(recs[i]),
					State: s.State.String(), ReceiveCount: s.ReceiveCount, VisibleAt: s.VisibleAt})
			}
		}
		pos = end
	}
	res.Next = pos
	return res, nil
}
