package broker

import (
	"context"
	"errors"
	"fmt"
)

// ErrDeleteRecordsCompacted: DeleteRecords on a topic whose cleanup.policy is compact
// only. Kafka refuses it too: such a topic keeps the latest value of every key, which a
// moved log start would drop.
var ErrDeleteRecordsCompacted = errors.New("DeleteRecords needs cleanup.policy delete (or compact,delete): a compact-only topic keeps the latest value of every key")

// DeleteRecords moves the log start of topic/partition up to offset (Kafka's
// DeleteRecords; -1 is the high watermark) and returns the new log start (Kafka's low
// watermark). Records below it are gone for every reader: fetches below it are out of
// range, ListOffsets earliest answers it, and every subscription of the topic drops its
// records below it, delivered or not, as time retention does (a lease held on one of them
// is refused at its ack, as after retention). An offset past the high watermark fails
// with ErrOffsetOutOfRange and changes nothing; one at or below the log start changes
// nothing and answers the log start; a compact-only topic refuses it
// (ErrDeleteRecordsCompacted). The start is durable before the call returns.
//
// In a cluster it runs on the partition's leader (a *NotLeaderError elsewhere) as one entry
// of the partition's group, applied by every replica (cluster_delete_records.go).
func (b *Broker) DeleteRecords(ctx context.Context, topic string, partition int32, offset int64) (int64, error) {
	t, p, err := b.streams.partition(topic, partition)
	if err != nil {
		return 0, err
	}
	if s, _ := t.snapshot(); !s.Deletes() {
		return 0, ErrDeleteRecordsCompacted
	}
	if p.repl.Load() != nil || b.cluster != nil {
		return b.deleteRecordsReplicated(ctx, p, offset)
	}
	if offset == -1 {
		offset = p.log.HighWatermark()
	}
	if offset < 0 {
		return 0, fmt.Errorf("%w: DeleteRecords to %d", ErrOffsetOutOfRange, offset)
	}
	start, err := p.log.MoveStart(offset)
	if err != nil {
		return 0, mapStorageErr(err)
	}
	t.mu.RLock()
	subs := make([]*subRT, 0, len(t.subs))
	for _, sub := range t.subs {
		subs = append(subs, sub)
	}
	t.mu.RUnlock()
	var firstErr error
	for _, sub := range subs {
		if err := sub.expireBelow(p.index, start); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	p.prod.Expire(start)
	p.txn.expire(start)
	return start, firstErr
}
