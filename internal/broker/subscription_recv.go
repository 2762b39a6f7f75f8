package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/cluster/replcursor"
	"github.com/sluice-mq/sluice/internal/queue"
)

// SubscriptionDelivery is a record received from a subscription, with its
// lease.
type SubscriptionDelivery struct {
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []batch.RecordHeader
	Timestamp time.Time

	Receipt         string // opaque: authenticated, bound to the subscription (receipt.go, cluster_receipts.go)
	ReceiveCount    int
	FirstReceivedAt time.Time
	Deadline        time.Time
	FencingToken    uint64 // grows across deliveries of a record
}

// SubscriptionReceive hands out up to opts.Max records, each hidden for
// the visibility timeout, once the deliveries are journaled. With a wait it
// blocks until a record arrives or comes due (a produce wakes it at once),
// the wait ends, or ctx ends. opts.Wait WaitQueueDefault means no wait.
func (b *Broker) SubscriptionReceive(ctx context.Context, topic, name string, opts ReceiveOptions) ([]SubscriptionDelivery, error) {
	if c := b.clusterTopic(topic); c != nil {
		return c.subReceive(ctx, topic, name, opts) // cluster_subs_recv.go
	}
	_, sub, err := b.subscription(topic, name)
	if err != nil {
		return nil, err
	}
	if opts.Max == 0 {
		opts.Max = 1
	}
	if opts.Max < 0 || opts.Max > MaxReceiveBatch {
		return nil, invalid("max", "%d: want 1 to %d", opts.Max, MaxReceiveBatch)
	}
	if opts.Wait < 0 {
		opts.Wait = 0
	}
	return longPoll(ctx, opts.Wait, b.now, func() ([]SubscriptionDelivery, <-chan struct{}, time.Time, error) {
		return sub.receiveOnce(ctx, opts)
	})
}

// receiveOnce tries one receive round over the partitions.
func (sub *subRT) receiveOnce(ctx context.Context, opts ReceiveOptions) ([]SubscriptionDelivery, <-chan struct{}, time.Time, error) {
	if err := sub.lockChecked(); err != nil {
		return nil, nil, time.Time{}, err
	}
	recs, got, firstErr := sub.receiveLocked(opts)
	recs, dead := splitDeadLetters(recs)
	done := sub.recordLocked(recs)
	wake, due, parts := sub.wake, sub.nextDueLocked(), sub.parts
	target, source := sub.settings.DeadLetterQueue, subKey(sub.t.name, sub.settings.Name)
	sub.mu.Unlock()
	err := errors.Join(firstErr, sub.wait(done))
	if err == nil && len(dead) > 0 {
		err = sub.deadLetter(ctx, sub.t.s.b, target, dead, sub.deadLetterCopies(parts, source))
	}
	if err != nil {
		return nil, nil, time.Time{}, fmt.Errorf("receive from %s: %w", subKey(sub.t.name, sub.settings.Name), err)
	}
	if len(got) == 0 {
		return nil, wake, due, nil
	}
	out, err := sub.deliveries(parts, got)
	return out, wake, due, err
}

// receiveLocked receives from each partition's cursor in turn, starting
// one further than last time, until opts.Max. It returns the events to
// journal (dead letters among them) and the deliveries. Called with mu held.
func (sub *subRT) receiveLocked(opts ReceiveOptions) ([]cursorEvent, []partDelivery, error) {
	now := sub.t.s.b.now()
	var recs []cursorEvent
	var got []partDelivery
	var firstErr error
	n := len(sub.curs)
	for i := 0; i < n && len(got) < opts.Max && firstErr == nil; i++ {
		p := (sub.next + i) % n
		evs, err := sub.fillLocked(p, now)
		if err == nil {
			var ds []queue.Delivery
			var more []queue.Event
			ds, more, err = sub.curs[p].Receive(now, opts.Max-len(got), opts.Visibility)
			evs = append(evs, more...)
			for _, d := range ds {
				got = append(got, partDelivery{p, d})
			}
		}
		recs = onCursor(recs, p, evs)
		if err != nil {
			firstErr = mapCursorErr(err)
		}
	}
	if n > 0 {
		sub.next = (sub.next + 1) % n
	}
	return recs, got, firstErr
}

type partDelivery struct {
	p int
	d queue.Delivery
}

// fillLocked offers cursor p the records after its read position, as many
// as it wants. Called with mu held.
func (sub *subRT) fillLocked(p int, now time.Time) ([]queue.Event, error) {
	return sub.fillReadsLocked(p, now, -1)
}

// fillReadsLocked is fillLocked reading the log at most reads times
// (negative: no limit). Called with mu held.
func (sub *subRT) fillReadsLocked(p int, now time.Time, reads int) ([]queue.Event, error) {
	c, log := sub.curs[p], sub.parts[p].log
	if w := c.Wants(); w < fillMin && w < c.Config().Lookahead {
		return nil, nil
	}
	var evs []queue.Event
	for c.Wants() > 0 && reads != 0 {
		pos := c.ReadPos()
		if start := log.LogStartOffset(); pos < start {
			evs = append(evs, c.Skip(start)...)
			continue
		}
		// Committed records only: a subscription waits at the last
		// stable offset and skips aborted transactions and markers.
		lso := partitionState(sub.parts[p]).LastStableOffset
		if pos >= lso {
			break
		}
		data, err := log.Read(pos, fillReadBytes)
		if err != nil {
			return evs, err
		}
		reads--
		data, next := sub.parts[p].committedBatches(data, lso)
		metas, end, err := sub.metas(data, pos)
		if err != nil {
			return evs, err
		}
		end = max(end, next)
		if len(metas) == 0 {
			if end <= pos { // nothing readable here: a damaged range, or nothing yet
				if end = log.SkipDamaged(pos); end == pos {
					break
				}
			}
			evs = append(evs, c.Skip(end)...)
			continue
		}
		k, e := c.Offer(now, metas)
		evs = append(evs, e...)
		if k == 0 {
			break
		}
	}
	return evs, nil
}

// metas decodes the cursor's view of each record at or after from. In a
// key-ordered subscription a record's FIFO group is its key; records
// without a key each get a group of their own (no order among them).
func (sub *subRT) metas(data []byte, from int64) ([]queue.Meta, int64, error) {
	var metas []queue.Meta
	end := from
	delay := sub.settings.DeliveryDelay
	err := eachRecord(data, func(r batch.Record) bool {
		end = r.Offset + 1
		if r.Offset < from {
			return true
		}
		m := queue.Meta{Offset: r.Offset, SentAt: time.UnixMilli(r.Timestamp)}
		if delay > 0 {
			m.AvailableAt = m.SentAt.Add(delay)
		}
		if sub.settings.KeyOrdered {
			if r.Key != nil {
				m.GroupID = "k" + string(r.Key)
			} else {
				m.GroupID = "o" + strconv.FormatInt(r.Offset, 10)
			}
		}
		metas = append(metas, m)
		return true
	})
	return metas, end, err
}

// readRecords copies the records at the given offsets out of a partition.
// An offset the log no longer holds (a damaged batch, quarantined) is
// missing from the map.
func readRecords(p *partitionRT, offsets []int64) (map[int64]batch.Record, error) {
	out := make(map[int64]batch.Record, len(offsets))
	want := map[int64]bool{}
	last := int64(-1)
	for _, off := range offsets {
		want[off] = true
		last = max(last, off)
	}
	for _, off := range offsets {
		if _, ok := out[off]; ok {
			continue
		}
		data, err := p.log.Read(off, readMessageBytes)
		if err != nil {
			return nil, fmt.Errorf("read record at %d: %w", off, err)
		}
		err = eachRecord(data, func(r batch.Record) bool {
			if want[r.Offset] {
				r.Key, r.Value = bytes.Clone(r.Key), bytes.Clone(r.Value)
				hs := make([]batch.RecordHeader, len(r.Headers))
				for i, h := range r.Headers {
					hs[i] = batch.RecordHeader{Key: h.Key, Value: bytes.Clone(h.Value)}
				}
				r.Headers = hs
				out[r.Offset] = r
			}
			return r.Offset < last
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// deliveries joins the cursors' deliveries with the records.
func (sub *subRT) deliveries(parts []*partitionRT, got []partDelivery) ([]SubscriptionDelivery, error) {
	byPart := map[int][]int64{}
	for _, g := range got {
		byPart[g.p] = append(byPart[g.p], g.d.Offset)
	}
	recs := map[int]map[int64]batch.Record{}
	for p, offs := range byPart {
		m, err := readRecords(parts[p], offs)
		if err != nil {
			return nil, err
		}
		recs[p] = m
	}
	out := make([]SubscriptionDelivery, 0, len(got))
	lost := map[int][]int64{}
	for _, g := range got {
		r, ok := recs[g.p][g.d.Offset]
		if !ok {
			lost[g.p] = append(lost[g.p], g.d.Offset)
			continue
		}
		out = append(out, SubscriptionDelivery{Partition: int32(g.p), Offset: g.d.Offset, Key: r.Key, Value: r.Value,
			Headers: r.Headers, Timestamp: time.UnixMilli(r.Timestamp),
			Receipt: sub.receiptOf(g.p, g.d), ReceiveCount: g.d.ReceiveCount,
			FirstReceivedAt: g.d.FirstReceivedAt, Deadline: g.d.Deadline, FencingToken: g.d.FencingToken})
	}
	for p, offs := range lost {
		if err := sub.lose(p, offs); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// SubscriptionAck finishes the delivery a current receipt names.
func (b *Broker) SubscriptionAck(ctx context.Context, topic, name, receipt string) error {
	if c := b.clusterTopic(topic); c != nil {
		return c.subLease(ctx, topic, name, receipt, replcursor.Op{Kind: replcursor.Ack})
	}
	_, sub, err := b.subscription(topic, name)
	if err != nil {
		return err
	}
	return sub.lease(b.now, receipt, ackLease)
}

// SubscriptionAckBatch acks several deliveries with one journal write.
// Each receipt gets its own result (nil, or why it was refused); the call's
// error is for the subscription as a whole.
func (b *Broker) SubscriptionAckBatch(ctx context.Context, topic, name string, receipts []string) ([]error, error) {
	if c := b.clusterTopic(topic); c != nil {
		return c.subLeaseBatch(ctx, topic, name, receipts, replcursor.Op{Kind: replcursor.Ack})
	}
	_, sub, err := b.subscription(topic, name)
	if err != nil {
		return nil, err
	}
	return sub.leaseBatch(b.now, receipts, ackLease)
}

// SubscriptionExtend keeps a delivery hidden until now+d (0: visible now).
func (b *Broker) SubscriptionExtend(ctx context.Context, topic, name, receipt string, d time.Duration) error {
	if c := b.clusterTopic(topic); c != nil {
		return c.subLease(ctx, topic, name, receipt, replcursor.Op{Kind: replcursor.Extend, Timeout: d})
	}
	_, sub, err := b.subscription(topic, name)
	if err != nil {
		return err
	}
	return sub.lease(b.now, receipt, extendLease(d))
}

// SubscriptionNack releases a delivery: visible again after delay. In a
// key-ordered subscription the key's later records wait behind it.
func (b *Broker) SubscriptionNack(ctx context.Context, topic, name, receipt string, delay time.Duration, reason string) error {
	if c := b.clusterTopic(topic); c != nil {
		return c.subLease(ctx, topic, name, receipt, replcursor.Op{Kind: replcursor.Nack, Delay: delay})
	}
	_, sub, err := b.subscription(topic, name)
	if err != nil {
		return err
	}
	return sub.lease(b.now, receipt, nackLease(delay, reason))
}
