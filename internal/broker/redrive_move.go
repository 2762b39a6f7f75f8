package broker

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// How a redrive task moves its messages, one batch per step: receive, save
// progress, send the copies, ack the originals (see redrive.go for the
// task's life and its promise across crashes).

// Batches. A step receives at most redriveBatchMax messages; at a rate
// limit, at most what the rate allows in redriveStep (but at least one), so
// the moves stay spread over each second instead of coming in bursts. One
// send to a destination carries at most redriveSendBytes of messages: a
// queue's log takes batches of up to 8 MiB, and messages may be 1 MiB each.
const (
	redriveBatchMax  = 100
	redriveStep      = 100 * time.Millisecond
	redriveSendBytes = 4 << 20
)

// redriveStepSize is how many messages one step of a task may receive.
func redriveStepSize(rate int) int {
	if rate <= 0 {
		return redriveBatchMax
	}
	return int(max(1, min(redriveBatchMax, int64(rate)*int64(redriveStep)/int64(time.Second))))
}

// redriveLoop examines at most r.depth messages (what the queue held at the
// start), so messages that arrive meanwhile, or that the filter skips, do not
// keep it running. A skipped message stays hidden in the dead-letter queue
// for redriveVisibility, so no later step receives it again.
func (b *Broker) redriveLoop(ctx context.Context, r *redriveRun) error {
	rate := r.task.RatePerSecond
	step := int64(redriveStepSize(rate))
	next := b.now()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		// Never more than the limit leaves to move: with a filter, every
		// message of the batch may pass, and the limit must still hold.
		r.mu.Lock()
		want := min(step, r.depth-r.examined)
		if r.limit > 0 {
			want = min(want, r.limit-r.task.Moved)
		}
		r.mu.Unlock()
		if want <= 0 {
			return nil
		}
		ds, err := b.Receive(ctx, r.task.Source, ReceiveOptions{Max: int(want), Visibility: redriveVisibility})
		if err != nil || len(ds) == 0 {
			return err
		}
		move := make([]Delivery, 0, len(ds))
		for _, d := range ds {
			if (r.match == nil || r.match.accepts(&d.Message)) && (r.filter == nil || r.filter(&d.Message)) {
				move = append(move, d)
			}
		}
		// Where each one goes. A message with nowhere to go fails the task,
		// as it would have one message at a time: the ones before it still
		// move, it and the ones after it are handed back unexamined.
		dests, failed := b.redriveDestinations(r.task.Destination, move)
		var cut []Delivery
		if failed != nil {
			move, cut = move[:len(dests)], move[len(dests):]
		}
		r.mu.Lock()
		r.examined += int64(len(ds))
		r.task.Skipped += int64(len(ds) - len(move) - len(cut))
		r.holding = receiptsOf(move)
		r.mu.Unlock()
		b.releaseRedrive(r, receiptsOf(cut))
		if len(move) == 0 {
			if failed != nil {
				return failed
			}
			continue // all skipped: nothing to save or wait for
		}
		// Progress so far and the receipts of the batch about to move,
		// durable before the move: a restart hands those messages back.
		if err := b.saveRedrive(r); err != nil {
			b.releaseRedrive(r, receiptsOf(move))
			return fmt.Errorf("save progress: %w", err)
		}
		if rate > 0 {
			now := b.now()
			next = next.Add(time.Duration(len(move)) * time.Second / time.Duration(rate))
			if next.Before(now) {
				next = now // fell behind: no burst to catch up
			}
			err = r.sleep(ctx, next.Sub(now))
		} else {
			err = ctx.Err()
		}
		if err != nil {
			b.releaseRedrive(r, receiptsOf(move))
			return err
		}
		// Not cancelled half way: a cancel or Close stops after this batch.
		if err := b.redriveBatch(context.WithoutCancel(ctx), r, move, dests); err != nil {
			return err
		}
		if failed != nil {
			return failed
		}
	}
}

func receiptsOf(ds []Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Receipt
	}
	return out
}

// redriveDestinations finds the queue each message goes to: dest, or else
// the queue it was dead-lettered from. It stops at the first message that
// has none (or whose queue is gone), returning the queues of the ones
// before it and why.
func (b *Broker) redriveDestinations(dest string, ds []Delivery) ([]redriveDest, error) {
	qs := make([]redriveDest, 0, len(ds))
	for _, d := range ds {
		name := dest
		if name == "" && d.DeadLetter != nil {
			name = d.DeadLetter.SourceQueue
		}
		if name == "" {
			return qs, fmt.Errorf("message %s has no source queue to return to; name a destination", d.ID)
		}
		if b.cluster != nil && b.cluster.clusteredQueue(name) {
			qs = append(qs, redriveDest{name: name}) // its group's (cluster_queues_redrive.go)
			continue
		}
		q, err := b.queue(name)
		if err != nil {
			return qs, err
		}
		qs = append(qs, redriveDest{q: q, name: name})
	}
	return qs, nil
}

// redriveBatch sends a batch to its destinations (ds[i] to dests[i]), then
// acks, in one AckBatch, the messages whose copies are durable, and counts
// them as moved. What did not reach its destination is handed back to the
// dead-letter queue, and the first failure is returned.
func (b *Broker) redriveBatch(ctx context.Context, r *redriveRun, ds []Delivery, dests []redriveDest) error {
	// One list per destination, in the order received, so a FIFO
	// destination gets each group's messages in their order.
	var order []redriveDest
	byDest := map[redriveDest][]int{}
	for i, q := range dests {
		if _, ok := byDest[q]; !ok {
			order = append(order, q)
		}
		byDest[q] = append(byDest[q], i)
	}
	// The dead-letter record each copy is made from names the copy for a
	// FIFO destination's dedup (see copyDedupID).
	srcRecord := func(seq int64) string { return fmt.Sprintf("queue %s@%d", r.task.Source, seq) }
	if src, err := b.queue(r.task.Source); err == nil {
		srcRecord = src.queueRecord
	}
	sent := make([]bool, len(ds))
	var firstErr error
	for _, q := range order {
		idx := byDest[q]
		for len(idx) > 0 && firstErr == nil {
			n, size := 0, 0
			for n < len(idx) && (n == 0 || size+encodedSize(&ds[idx[n]].Message) <= redriveSendBytes) {
				size += encodedSize(&ds[idx[n]].Message)
				n++
			}
			if q.q == nil {
				firstErr = b.cluster.redriveSend(ctx, r.task.Source, q.name, ds, idx[:n], sent)
			} else {
				firstErr = b.redriveSend(ctx, q.q, ds, idx[:n], sent, srcRecord)
			}
			idx = idx[n:]
		}
		if firstErr != nil {
			break // the rest stay in the dead-letter queue
		}
	}
	var acks []string
	var ackOf []int // acks[k] is ds[ackOf[k]]'s
	for i, d := range ds {
		if sent[i] {
			acks = append(acks, d.Receipt)
			ackOf = append(ackOf, i)
		}
	}
	acked := make([]bool, len(ds))
	moved := 0
	if len(acks) > 0 {
		results, err := b.AckBatch(ctx, r.task.Source, acks)
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("ack in %s: %w", r.task.Source, err)
		}
		for k, i := range ackOf {
			switch {
			case err == nil && results[k] == nil:
				acked[i] = true
				moved++
			case results != nil && results[k] != nil && firstErr == nil:
				firstErr = fmt.Errorf("ack %s in %s: %w", ds[i].ID, r.task.Source, results[k])
			}
		}
	}
	var back []string
	for i, d := range ds {
		if !acked[i] {
			back = append(back, d.Receipt)
		}
	}
	r.mu.Lock()
	r.task.Moved += int64(moved)
	r.holding = back // acked ones must not be counted again by a restart
	r.mu.Unlock()
	b.releaseRedrive(r, back)
	return firstErr
}

// redriveDest is where a redriven message goes: a local queue, or (q nil) a cluster's
// queue, by name.
type redriveDest struct {
	q    *queueRT
	name string
}

// redriveSend sends ds[i] for each i of idx to q, keeping each message's id,
// and marks in sent the ones now durable there.
func (b *Broker) redriveSend(ctx context.Context, q *queueRT, ds []Delivery, idx []int, sent []bool, srcRecord func(int64) string) error {
	in := make([]SendInput, len(idx))
	keep := make([]*Message, len(idx))
	for k, i := range idx {
		m := ds[i].Message
		keep[k] = &Message{ID: m.ID, SentAt: m.SentAt} // a fresh start: no dead-letter history
		// A FIFO destination gets the message's own group, or for one
		// without (from a standard queue) its source queue's name, and a
		// dedup id of this copy, so a copy sent again after a crash is
		// dropped but the next redrive of the same message is not.
		in[k] = dlqInput(&m, q, srcRecord(ds[i].Sequence))
	}
	res, err := q.send(ctx, in, keep)
	if err != nil {
		return fmt.Errorf("redrive %d messages to %s: %w", len(idx), q.name, err)
	}
	var firstErr error
	for k, i := range idx {
		if res[k].Err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("redrive %s to %s: %w", ds[i].ID, q.name, res[k].Err)
			}
			continue
		}
		sent[i] = true
	}
	return firstErr
}

// releaseRedrive hands messages a task holds back to the dead-letter queue
// at once (instead of after redriveVisibility), unexamined. When Close
// stopped the task the queues are closed already: the receipts stay in the
// task's file, and the next Open hands the messages back (takeBack).
func (b *Broker) releaseRedrive(r *redriveRun, receipts []string) {
	if len(receipts) == 0 {
		return
	}
	b.redrive.mu.Lock()
	stopping := b.redrive.stopping
	b.redrive.mu.Unlock()
	if stopping {
		return
	}
	for _, err := range b.nackAll(r.task.Source, receipts) {
		if err != nil {
			b.log.Warn("redrive: hand a message back", "task", r.task.ID, "err", err)
		}
	}
	gone := map[string]bool{}
	for _, rc := range receipts {
		gone[rc] = true
	}
	r.mu.Lock()
	r.examined -= int64(len(receipts))
	kept := r.holding[:0:0]
	for _, rc := range r.holding {
		if !gone[rc] {
			kept = append(kept, rc)
		}
	}
	r.holding = kept
	r.mu.Unlock()
}

// nackAll makes the messages of receipts visible again in queue at once,
// each with its own result. The nacks run together, so the queue's journal
// commits them in a few writes rather than one sync each.
func (b *Broker) nackAll(queue string, receipts []string) []error {
	errs := make([]error, len(receipts))
	var wg sync.WaitGroup
	for i, rc := range receipts {
		wg.Go(func() { errs[i] = b.Nack(context.Background(), queue, rc, 0, "") })
	}
	wg.Wait()
	return errs
}
