package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/replpart"
)

// AlterShareGroupOffsets in a cluster. It runs on the group's coordinator (the controller,
// which knows the group has no members and changes the catalog); a share-partition's start
// is its subscription cursor's floor in the partition's Raft group, which only that
// group's leader can move. So the coordinator proposes replpart's SkipTo itself when it
// leads the partition, and otherwise asks the leader over a node-to-node request
// (replpart.RequestSkip): the answer comes once the entry is committed and applied there,
// so the start has moved on every replica that applied it, and a new leader keeps it.

// shareSkipWait bounds how long one alter waits for a partition: for an election, and for
// a new subscription's cursor, which the leaders' reconcilers make moments after the
// catalog has the subscription.
var shareSkipWait = 10 * time.Second

// alterShareStart is AlterShareGroupOffset in a cluster, under the empty group's lock.
func (c *clusterRT) alterShareStart(group, topic string, partition int32, offset int64) error {
	s, err := c.subscription(topic, group)
	if errors.Is(err, ErrSubscriptionNotFound) { // as Kafka, altering initialises the state
		cfg := c.b.ShareGroupConfig(group)
		if _, err = c.b.CreateSubscription(SubscriptionSettings{Topic: topic, Name: group, FromEarliest: true,
			VisibilityTimeout: cfg.LockDuration}); err == nil {
			s, err = c.subscription(topic, group)
		}
	}
	if err != nil {
		return err
	}
	ct, ok := c.clusteredTopic(topic)
	if !ok {
		return c.unknownTopic(topic)
	}
	if partition < 0 || int(partition) >= len(ct.Partitions) {
		return fmt.Errorf("%w: %s/%d", ErrUnknownPartition, topic, partition)
	}
	var here *hostedReplica
	if t, err := c.b.streams.topic(topic); err == nil {
		if _, parts := t.snapshot(); int(partition) < len(parts) {
			here = parts[partition].repl.Load()
		}
	}
	err = c.skipCursor(ct.Partitions[partition], here, s.ID, offset)
	var re *replpart.SkipRangeError
	switch {
	case errors.As(err, &re) && re.BelowStart():
		return invalid("start_offset", "%d is below the share-partition's start %d: sluice moves it forward only", offset, re.Start)
	case errors.As(err, &re):
		return fmt.Errorf("%w: %d is past the high watermark %d", ErrOffsetOutOfRange, offset, re.End)
	case err != nil:
		return fmt.Errorf("%w: moving the start of %s/%d for share group %s: %w", ErrReplicationUnknown, topic, partition, group, err)
	}
	return nil
}

// skipCursor has the leader of cp skip subscription sub's cursor to offset: this node's
// replica (here, nil if it has none) when it leads, else the leader it knows, else each
// replica in turn, which names the leader if it is not. An election, a leader still
// without the cursor and a lost request are retried until shareSkipWait (a skip repeated
// after an unknown outcome moves the start to the same place); the last failure is returned.
func (c *clusterRT) skipCursor(cp meta.Partition, here *hostedReplica, sub uint64, offset int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), shareSkipWait)
	defer cancel()
	var named multiraft.NodeID // the leader the last answer named
	var last error
	for {
		targets := cp.Replicas
		if named != 0 {
			targets = []multiraft.NodeID{named}
		} else if here != nil {
			if l, _ := here.part.Leader(); l != 0 {
				targets = []multiraft.NodeID{l}
			}
		}
		named = 0
		for _, n := range targets {
			var err error
			switch {
			case n != c.node:
				err = replpart.RequestSkip(ctx, c.host, n, cp.Group, sub, offset)
			case here != nil:
				err = here.part.SkipCursor(ctx, sub, offset)
			default:
				continue // listed here, not hosted yet: ask the others
			}
			var nl *replpart.NotLeaderError
			var re *replpart.SkipRangeError
			switch {
			case err == nil, errors.As(err, &re):
				return err
			case errors.As(err, &nl) && nl.Leader != 0 && nl.Leader != n:
				named, last = nl.Leader, err
			default:
				last = err
			}
			if named != 0 {
				break
			}
		}
		wait := 50 * time.Millisecond
		if named != 0 {
			wait = 5 * time.Millisecond // ask the named leader at once, but never spin
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = ctx.Err()
			}
			return last
		case <-time.After(wait):
		}
	}
}
