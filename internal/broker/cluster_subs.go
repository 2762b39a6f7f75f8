package broker

// Subscriptions in a cluster (docs/cluster.md, "Subscriptions in a cluster").
//
// A subscription of a replicated topic is defined in the catalog — in the topic's catalog
// settings, beside the topic's own (so every node knows it, and a topic's delete takes its
// subscriptions along) — and its cursor in each partition lives in that partition's Raft
// group (internal/cluster/replpart): a receive, an ack, a nack or an extend is an entry of
// the group, applied to the same queue.Cursor on every replica. The partition's leader
// serves them; another node answers NOT_LEADER naming it, and the SQS and native
// front-ends forward there. Each node's reconciler gives the partitions it leads a cursor
// for every catalog subscription they lack, and removes the cursors of deleted ones
// (cluster_subs_host.go).

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
)

// catalogSubsKey is the key of the subscriptions in a topic's catalog settings (a JSON
// object: the TopicSettings fields and this one).
const catalogSubsKey = "subscriptions"

// subsOf reads a catalog topic's subscriptions, by name.
func subsOf(ct *meta.Topic) (map[string]SubscriptionSettings, error) {
	var v struct {
		Subs map[string]SubscriptionSettings `json:"subscriptions"`
	}
	if len(ct.Settings) > 0 {
		if err := json.Unmarshal(ct.Settings, &v); err != nil {
			return nil, fmt.Errorf("catalog subscriptions of topic %s: %w", ct.Name, err)
		}
	}
	if v.Subs == nil {
		v.Subs = map[string]SubscriptionSettings{}
	}
	return v.Subs, nil
}

// withSubs is a topic's catalog settings with its subscriptions set to subs.
func withSubs(settings []byte, subs map[string]SubscriptionSettings) ([]byte, error) {
	obj := map[string]json.RawMessage{}
	if len(settings) > 0 {
		if err := json.Unmarshal(settings, &obj); err != nil {
			return nil, err
		}
	}
	delete(obj, catalogSubsKey)
	if len(subs) > 0 {
		raw, err := json.Marshal(subs)
		if err != nil {
			return nil, err
		}
		obj[catalogSubsKey] = raw
	}
	return json.Marshal(obj)
}

// clusteredTopic is the catalog's topic of that name, if the catalog has it (its
// subscriptions are then replicated ones).
func (c *clusterRT) clusteredTopic(name string) (*meta.Topic, bool) {
	ct := c.meta.State().Topics[name]
	return ct, ct != nil
}

// createSubscription adds a subscription to its topic's catalog settings; the partitions'
// leaders then give it a cursor in their groups (at the log's end as that entry applies,
// or its start with FromEarliest).
func (c *clusterRT) createSubscription(s SubscriptionSettings) (SubscriptionSettings, error) {
	if t, err := c.b.streams.topic(s.Topic); err == nil {
		ts, _ := t.snapshot()
		if err := checkCompactedSubscription(s, ts); err != nil { // cluster_compaction.go
			return SubscriptionSettings{}, err
		}
	}
	if s.DeadLetterQueue != "" {
		// A catalog queue: the copies go through its group (cluster_subs_dlq.go).
		if _, err := c.getQueue(s.DeadLetterQueue); err != nil {
			return SubscriptionSettings{}, err
		}
	}
	s.CreatedAt = c.b.now()
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return SubscriptionSettings{}, err
	}
	// Never 0, never reused in practice (63 random bits): it names the cursor in every
	// partition's group and binds receipts, so a subscription deleted and created again
	// under its name refuses the old one's.
	s.ID = binary.BigEndian.Uint64(id[:])>>1 | 1
	err := c.changeSubs(s.Topic, func(subs map[string]SubscriptionSettings) error {
		if _, ok := subs[s.Name]; ok {
			return fmt.Errorf("%w: %s", ErrSubscriptionExists, subKey(s.Topic, s.Name))
		}
		subs[s.Name] = s
		return nil
	})
	if err != nil {
		return SubscriptionSettings{}, err
	}
	c.reconcileCursors()
	return s, nil
}

// deleteSubscription removes a subscription from the catalog; the leaders then drop its
// cursors.
func (c *clusterRT) deleteSubscription(topic, name string) error {
	err := c.changeSubs(topic, func(subs map[string]SubscriptionSettings) error {
		if _, ok := subs[name]; !ok {
			return fmt.Errorf("%w: %s", ErrSubscriptionNotFound, subKey(topic, name))
		}
		delete(subs, name)
		return nil
	})
	if err == nil {
		c.reconcileCursors()
	}
	return err
}

// changeSubs applies fn to a topic's catalog subscriptions and proposes the result, on the
// controller only: the catalog replaces a topic's settings whole, so the change must be
// computed from the latest settings (a follower's view may lag, and its change would undo
// one it has not seen), and the controller's changes are made one at a time (subsMu). A
// follower answers NOT_LEADER naming the controller; the front-ends forward. (A topic's
// own settings changed through a lagging follower at the same moment can still undo a
// subscription change: docs/cluster.md, "Subscriptions in a cluster".)
func (c *clusterRT) changeSubs(topic string, fn func(map[string]SubscriptionSettings) error) error {
	if l := c.cat.Leader(); l != c.node {
		return &NotLeaderError{What: "the catalog (subscriptions of " + topic + ")", Catalog: true, Leader: int32(l)}
	}
	c.subsMu.Lock()
	defer c.subsMu.Unlock()
	ct, ok := c.clusteredTopic(topic)
	if !ok {
		return c.unknownTopic(topic)
	}
	subs, err := subsOf(ct)
	if err != nil {
		return err
	}
	if err := fn(subs); err != nil {
		return err
	}
	settings, err := withSubs(ct.Settings, subs)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), catalogTimeout)
	defer cancel()
	if _, err := c.cat.UpdateTopic(ctx, topic, settings); err != nil {
		return c.catalogErr(err)
	}
	c.reconcile()
	return nil
}

// subscription is a catalog subscription.
func (c *clusterRT) subscription(topic, name string) (SubscriptionSettings, error) {
	ct, ok := c.clusteredTopic(topic)
	if !ok {
		return SubscriptionSettings{}, c.unknownTopic(topic)
	}
	subs, err := subsOf(ct)
	if err != nil {
		return SubscriptionSettings{}, err
	}
	s, ok := subs[name]
	if !ok {
		// This node's view of the catalog may lag (a restart replaying the metadata log):
		// the controller's does not, so a follower sends the call there.
		// (Leader unknown: an election; the client retries.)
		if l := c.cat.Leader(); l != c.node {
			return SubscriptionSettings{}, &NotLeaderError{What: "the catalog (subscription " + subKey(topic, name) + ")",
				Catalog: true, Leader: int32(l)}
		}
		return SubscriptionSettings{}, fmt.Errorf("%w: %s", ErrSubscriptionNotFound, subKey(topic, name))
	}
	return s, nil
}

// listSubscriptions lists a catalog topic's subscriptions by name.
func (c *clusterRT) listSubscriptions(topic string) ([]SubscriptionSettings, error) {
	ct, ok := c.clusteredTopic(topic)
	if !ok {
		return nil, c.unknownTopic(topic)
	}
	subs, err := subsOf(ct)
	if err != nil {
		return nil, err
	}
	out := make([]SubscriptionSettings, 0, len(subs))
	for _, s := range subs {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// clusterTopic is the cluster runtime when topic is a catalog topic (its subscriptions
// replicated) or one this node does not have at all (its catalog may lag: the cluster path
// sends the call to the controller), else nil: a single node, or a topic this node had
// before it joined a cluster, served as before.
func (b *Broker) clusterTopic(topic string) *clusterRT {
	if b.cluster == nil {
		return nil
	}
	if _, ok := b.cluster.clusteredTopic(topic); !ok {
		if _, err := b.streams.topic(topic); err == nil {
			return nil
		}
	}
	return b.cluster
}

// unknownTopic answers a call for a topic this node's catalog lacks: the controller's
// view does not lag, so a follower sends the call there; the controller says not found.
func (c *clusterRT) unknownTopic(topic string) error {
	if l := c.cat.Leader(); l != c.node { // 0: an election is on, the client retries
		return &NotLeaderError{What: "the catalog (topic " + topic + ")", Catalog: true, Leader: int32(l)}
	}
	return fmt.Errorf("%w: %s", ErrTopicNotFound, topic)
}

// subStats sums a replicated subscription's cursors over the partitions hosted here, as
// this node's replicas hold them (a follower's lag behind its leader's). Records not yet
// read into a cursor (past its lookahead window) are not counted.
func (c *clusterRT) subStats(topic, name string) (QueueStats, error) {
	s, err := c.subscription(topic, name)
	if err != nil {
		return QueueStats{}, err
	}
	t, err := c.b.streams.topic(topic)
	if err != nil {
		return QueueStats{}, err
	}
	st := QueueStats{Topic: topic, Name: name}
	_, parts := t.snapshot()
	for _, p := range parts {
		h := p.repl.Load()
		if h == nil {
			continue
		}
		cs, ok := h.sm.CursorCounts(s.ID)
		if !ok {
			continue
		}
		st.Visible += int64(cs.Ready + cs.Blocked)
		st.InFlight += int64(cs.InFlight)
		st.Delayed += int64(cs.Delayed)
		st.Received += cs.Receives
		st.Redelivered += cs.Redeliveries
		st.Acked += cs.Acks
		st.DeadLettered += cs.DeadLettered
		st.Expired += cs.Expired
		st.StaleRefused += h.staleOf(s.ID)
		if !cs.OldestSentAt.IsZero() {
			st.OldestAge = max(st.OldestAge, c.b.now().Sub(cs.OldestSentAt))
		}
	}
	return st, nil
}
