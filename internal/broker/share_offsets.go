package broker

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/sluice-mq/sluice/internal/queue"
)

// The share-group offset admin APIs (KIP-932: DescribeShareGroupOffsets,
// AlterShareGroupOffsets, DeleteShareGroupOffsets) over the group's
// subscriptions: a share-partition's start offset (SPSO) is its cursor's
// floor, the lowest offset not yet finished.

// SharePartitionOffset is a share-partition's start offset and lag: the
// records at or after the start not yet finished (acknowledged, archived
// or dead-lettered), delivered or not.
type SharePartitionOffset struct {
	Partition int32
	Start     int64
	Lag       int64
}

// ShareGroupTopics lists the topics a share group has a subscription of.
func (b *Broker) ShareGroupTopics(group string) []string {
	if b.cluster != nil {
		return b.cluster.shareGroupTopics(group) // cluster_share_acks.go
	}
	var out []string
	for _, t := range b.streams.topicList() {
		if _, _, err := b.subscription(t.name, group); err == nil {
			out = append(out, t.name)
		}
	}
	sort.Strings(out)
	return out
}

// ShareGroupOffsets reports every partition of the group's subscription of
// topic (ErrSubscriptionNotFound if it has none).
func (b *Broker) ShareGroupOffsets(group, topic string) ([]SharePartitionOffset, error) {
	if c := b.clusterTopic(topic); c != nil {
		return c.shareGroupOffsets(group, topic) // cluster_share_acks.go
	}
	_, sub, err := b.subscription(topic, group)
	if err != nil {
		return nil, err
	}
	sub.mu.Lock()
	defer sub.mu.Unlock()
	out := make([]SharePartitionOffset, len(sub.curs))
	for i, c := range sub.curs {
		hw := sub.parts[i].log.HighWatermark()
		out[i] = SharePartitionOffset{Partition: int32(i), Start: c.Floor(), Lag: c.Unfinished(c.Floor(), hw)}
	}
	return out, nil
}

// lockEmptyShareGroup locks a group that must have no members for an
// admin operation, and returns what unlocks it. A group it had to create
// for the lock (an id no member joined since the start) is dropped again
// on unlock if still memberless, so admin calls naming ids that are not
// groups leave nothing behind in memory. In a cluster only the group
// coordinator knows the members, so only it runs these (NotCoordinatorError
// elsewhere); it is also the controller, which changes the catalog's
// subscriptions.
func (b *Broker) lockEmptyShareGroup(group string) (*shareGroup, func(), error) {
	if err := b.shareCoordinator(context.Background()); err != nil {
		return nil, nil, err
	}
	sg := b.shares()
	sg.mu.Lock()
	_, existed := sg.groups[group]
	sg.mu.Unlock()
	g := sg.lockCurrent(group, true)
	b.expireMembersLocked(g, b.now())
	if len(g.members) > 0 {
		g.mu.Unlock()
		return nil, nil, fmt.Errorf("%w: share group %s has %d members", ErrGroupNotEmpty, group, len(g.members))
	}
	unlock := func() {
		if !existed && len(g.members) == 0 {
			sg.mu.Lock()
			if sg.groups[group] == g {
				delete(sg.groups, group)
			}
			sg.mu.Unlock()
		}
		g.mu.Unlock()
	}
	return g, unlock, nil
}

// AlterShareGroupOffset moves a share-partition's start forward to offset
// (at most the high watermark), finishing every record below it; a topic
// the group had no state for gets it, from the log start. Moving the start
// back is refused: the cursor does not keep what it finished. In a cluster
// the partition's leader moves its replicated cursor (cluster_share_alter.go).
func (b *Broker) AlterShareGroupOffset(group, topic string, partition int32, offset int64) error {
	_, unlock, err := b.lockEmptyShareGroup(group)
	if err != nil {
		return err
	}
	defer unlock()
	if b.cluster != nil {
		return b.cluster.alterShareStart(group, topic, partition, offset)
	}
	_, sub, err := b.subscription(topic, group)
	if errors.Is(err, ErrSubscriptionNotFound) { // as Kafka, altering initialises the state
		cfg := b.ShareGroupConfig(group)
		if _, err = b.CreateSubscription(SubscriptionSettings{Topic: topic, Name: group, FromEarliest: true,
			VisibilityTimeout: cfg.LockDuration}); err == nil {
			_, sub, err = b.subscription(topic, group)
		}
	}
	if err != nil {
		return err
	}
	if err := sub.lockChecked(); err != nil {
		return err
	}
	if partition < 0 || int(partition) >= len(sub.curs) {
		sub.mu.Unlock()
		return fmt.Errorf("%w: %s/%d", ErrUnknownPartition, topic, partition)
	}
	c, hw := sub.curs[partition], sub.parts[partition].log.HighWatermark()
	floor := c.Floor()
	switch {
	case offset < floor:
		sub.mu.Unlock()
		return invalid("start_offset", "%d is below the share-partition's start %d: sluice moves it forward only", offset, floor)
	case offset > hw:
		sub.mu.Unlock()
		return fmt.Errorf("%w: %d is past the high watermark %d", ErrOffsetOutOfRange, offset, hw)
	}
	var evs []queue.Event
	if offset > floor {
		ev := queue.Skipped{From: floor, To: offset}
		if err := c.Apply(ev); err != nil {
			sub.mu.Unlock()
			return err
		}
		evs = append(evs, ev)
	}
	evs = append(evs, c.Skip(offset)...)
	done := sub.recordLocked(onCursor(nil, int(partition), evs))
	sub.mu.Unlock()
	return sub.wait(done)
}

// DeleteShareGroupOffsets deletes the group's subscription of topic: its
// share-partitions' state. The group must be empty.
func (b *Broker) DeleteShareGroupOffsets(group, topic string) error {
	_, unlock, err := b.lockEmptyShareGroup(group)
	if err != nil {
		return err
	}
	defer unlock()
	err = b.DeleteSubscription(topic, group)
	if errors.Is(err, ErrSubscriptionNotFound) {
		return fmt.Errorf("%w: share group %s has no state for topic %s", ErrTopicNotFound, group, topic)
	}
	return err
}
