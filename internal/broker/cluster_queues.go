package broker

// Queues in a cluster (docs/cluster.md, "Queues in a cluster").
//
// A queue is the catalog's (meta.Queue: its settings as JSON and one Raft group), and its
// messages live in that group's replicated state machine (internal/cluster/replqueue) on
// each replica, never in a local queue directory. CreateQueue, DeleteQueue and settings
// changes are catalog proposals (the metadata leader only, NotLeaderError with Catalog
// elsewhere); GetQueue and ListQueues read the catalog on any node; Send, Receive, Ack,
// Nack, Extend and QueueStats run on the queue group's leader and answer NotLeaderError
// elsewhere (the SQS front-end forwards them). The reconciler (cluster_queues_host.go)
// hosts each queue's group on the nodes the catalog places it on.
//
// FIFO queues (cluster_queues_fifo.go), dead-letter queues (cluster_queues_dlq.go), purge
// and redrive (cluster_queues_redrive.go) go through the groups too. What replqueue does
// not replicate is refused with ErrNotReplicated, never served from an unreplicated local
// queue: changing the retention or the extension limit after creation (both are the
// replicated cursor's configuration, which every replica must apply alike).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/replqueue"
	"go.etcd.io/raft/v3"
)

// ErrNotReplicated: the operation or setting is not supported for a queue in a cluster
// yet (the replicated queue lacks it), and is refused rather than served unreplicated.
var ErrNotReplicated = errors.New("not supported for a queue in a cluster yet")

func notReplicated(what string) error {
	return fmt.Errorf("%w: %s (docs/cluster.md, \"Queues in a cluster\")", ErrNotReplicated, what)
}

// clusteredQueue reports whether name is a catalog queue this node knows of.
func (c *clusterRT) clusteredQueue(name string) bool {
	return c.meta.State().Queues[name] != nil
}

// queueSettings decodes a catalog queue's settings; its ID is its group.
func queueSettingsOf(cq *meta.Queue) (QueueSettings, error) {
	var s QueueSettings
	if err := json.Unmarshal(cq.Settings, &s); err != nil {
		return QueueSettings{}, fmt.Errorf("catalog settings of queue %s: %w", cq.Name, err)
	}
	s.Name, s.ID = cq.Name, uint64(cq.Group)
	return s, nil
}

// checkDeadLetterTarget requires s's dead-letter queue to be a catalog queue of the same
// kind, as a single node's does: a cluster's queue never dead-letters into a local one.
func (c *clusterRT) checkDeadLetterTarget(s QueueSettings) error {
	if s.DeadLetterQueue == "" {
		return nil
	}
	t, err := c.getQueue(s.DeadLetterQueue)
	if err != nil {
		return fmt.Errorf("%w: dead-letter queue %s", ErrQueueNotFound, s.DeadLetterQueue)
	}
	if t.FIFO != s.FIFO {
		return invalid("dead_letter_queue", "%s: a FIFO queue's dead-letter queue must be FIFO, and a standard queue's standard", s.DeadLetterQueue)
	}
	return nil
}

func (c *clusterRT) createQueue(s QueueSettings) (QueueSettings, error) {
	if cq := c.meta.State().Queues[s.Name]; cq != nil {
		// SQS's CreateQueue is idempotent: answer an identical one on any node.
		return c.existingQueue(cq, s)
	}
	if err := c.checkDeadLetterTarget(s); err != nil {
		return QueueSettings{}, err
	}
	now := c.b.now()
	s.CreatedAt, s.ModifiedAt, s.ID = now, now, 0
	data, err := json.Marshal(s)
	if err != nil {
		return QueueSettings{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), catalogTimeout)
	defer cancel()
	cq, err := c.cat.CreateQueue(ctx, s.Name, c.defaultReplication(), data)
	if errors.Is(err, meta.ErrQueueExists) && cq != nil {
		return c.existingQueue(cq, s)
	}
	if err != nil {
		return QueueSettings{}, c.queueCatalogErr(err)
	}
	c.reconcileQueues()
	c.awaitLeader(cq.Group, queueLeaderWait)
	return queueSettingsOf(cq)
}

// queueLeaderWait bounds how long a create waits for its new group to elect: an SQS client
// that sends at once would otherwise meet ServiceUnavailable until it has, and the AWS SDK's
// retry budget (10 tokens, 5 per such retry) runs out in two requests.
const queueLeaderWait = 3 * time.Second

// awaitLeader returns once this node knows a leader of group g, when it does not host g
// (nothing to learn here: a request is forwarded then, and the forward retries), or after
// wait. The queue exists either way: the wait only spares the first requests a refusal.
func (c *clusterRT) awaitLeader(g multiraft.GroupID, wait time.Duration) {
	deadline := time.Now().Add(wait)
	for {
		st, err := c.host.Status(g)
		if err != nil || st.Leader != 0 || !time.Now().Before(deadline) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (c *clusterRT) existingQueue(cq *meta.Queue, want QueueSettings) (QueueSettings, error) {
	cur, err := queueSettingsOf(cq)
	if err != nil {
		return QueueSettings{}, err
	}
	if !sameSettings(cur, want) {
		return QueueSettings{}, fmt.Errorf("%w: %s", ErrQueueExists, want.Name)
	}
	return cur, nil
}

// catalogQueue is queue name as this node's catalog has it, or ErrQueueNotFound.
func (c *clusterRT) catalogQueue(name string) (*meta.Queue, error) {
	if cq := c.meta.State().Queues[name]; cq != nil {
		return cq, nil
	}
	return nil, fmt.Errorf("%w: %s", ErrQueueNotFound, name)
}

func (c *clusterRT) getQueue(name string) (QueueSettings, error) {
	cq, err := c.catalogQueue(name)
	if err != nil {
		return QueueSettings{}, err
	}
	return queueSettingsOf(cq)
}

// updateQueue applies fn to the catalog's settings and proposes the result.
func (c *clusterRT) updateQueue(name string, fn func(*QueueSettings)) (QueueSettings, error) {
	cur, err := c.getQueue(name)
	if err != nil {
		return QueueSettings{}, err
	}
	next := cur.clone()
	fn(&next)
	next.Name, next.ID, next.FIFO, next.CreatedAt = cur.Name, cur.ID, cur.FIFO, cur.CreatedAt
	next.Normalize()
	if err := next.Validate(); err != nil {
		return QueueSettings{}, err
	}
	if err := c.checkDeadLetterTarget(next); err != nil {
		return QueueSettings{}, err
	}
	next.ModifiedAt = c.b.now()
	stored := next
	stored.ID = 0
	// A change of times reaches the queue's group through its leader's reconciler
	// (cluster_queues_times.go); the group's creation times stay in the catalog.
	prev, err := c.catalogQueue(name)
	if err != nil {
		return QueueSettings{}, err
	}
	data, err := withCreatedTimes(stored, prev.Settings, cur)
	if err != nil {
		return QueueSettings{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), catalogTimeout)
	defer cancel()
	cq, err := c.cat.UpdateQueue(ctx, name, data)
	if err != nil {
		return QueueSettings{}, c.queueCatalogErr(err)
	}
	return queueSettingsOf(cq)
}

func (c *clusterRT) deleteQueue(name string) error {
	st := c.meta.State()
	for _, other := range st.QueueNames() {
		if s, err := queueSettingsOf(st.Queues[other]); err == nil && other != name && s.DeadLetterQueue == name {
			return fmt.Errorf("%w: %s is the dead-letter queue of %s", ErrQueueInUse, name, other)
		}
	}
	for _, topic := range sortedTopicNames(st) {
		subs, _ := subsOf(st.Topics[topic])
		for _, s := range subs {
			if s.DeadLetterQueue == name {
				return fmt.Errorf("%w: %s is the dead-letter queue of subscription %s", ErrQueueInUse, name, subKey(topic, s.Name))
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), catalogTimeout)
	defer cancel()
	if err := c.cat.DeleteQueue(ctx, name); err != nil {
		return c.queueCatalogErr(err)
	}
	c.reconcileQueues()
	return nil
}

// queueNames lists the catalog's queues with prefix.
func (c *clusterRT) queueNames(prefix string) []string {
	var out []string
	for _, n := range c.meta.State().QueueNames() {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}

func (c *clusterRT) queueCatalogErr(err error) error {
	var nl *meta.NotLeaderError
	switch {
	case errors.As(err, &nl):
		return &NotLeaderError{What: "the catalog", Catalog: true, Leader: int32(nl.Leader)}
	case errors.Is(err, meta.ErrQueueExists):
		return ErrQueueExists
	case errors.Is(err, meta.ErrUnknownQueue):
		return ErrQueueNotFound
	case errors.Is(err, meta.ErrInvalidQueueName):
		return invalid("name", "%v", err)
	case errors.Is(err, meta.ErrReplicationFactor):
		return c.replicationErr(err)
	case errors.Is(err, meta.ErrOutcomeUnknown):
		return fmt.Errorf("%w: %w", ErrReplicationUnknown, err)
	}
	return err
}

// leaderQueue returns the hosted queue name if this node leads its group, else a
// *NotLeaderError naming the leader it believes in (the catalog's preferred leader when
// this node is no replica).
func (c *clusterRT) leaderQueue(name string) (*hostedQueue, QueueSettings, error) {
	cq, err := c.catalogQueue(name)
	if err != nil {
		return nil, QueueSettings{}, err
	}
	s, err := queueSettingsOf(cq)
	if err != nil {
		return nil, QueueSettings{}, err
	}
	what := "queue " + name
	h := c.hostedQueue(name)
	if h == nil || h.group != cq.Group {
		if slices.Contains(cq.Replicas, c.node) {
			return nil, s, &NotLeaderError{What: what} // placed here, not hosted yet
		}
		// Hosted elsewhere: the leader its replicas named (cluster_leaders.go), else the
		// preferred replica, which knows the leader if it is not it.
		leader := cq.Replicas[0]
		if rl, ok := c.remoteLeaderOf(cq.Group); ok {
			leader = rl.Leader
		}
		return nil, s, &NotLeaderError{What: what, Leader: int32(leader)}
	}
	st, err := c.host.Status(h.group)
	if err != nil {
		return nil, s, &NotLeaderError{What: what}
	}
	if st.Role != raft.StateLeader {
		return nil, s, &NotLeaderError{What: what, Leader: int32(st.Leader)}
	}
	return h, s, nil
}

// replErr maps a replicated queue's errors to the broker's.
func replErr(name string, err error) error {
	var nl *replqueue.NotLeaderError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &nl):
		return &NotLeaderError{What: "queue " + name, Leader: int32(nl.Leader)}
	case errors.Is(err, replqueue.ErrOutcomeUnknown), errors.Is(err, multiraft.ErrProposalDropped),
		errors.Is(err, multiraft.ErrRemoved):
		return fmt.Errorf("%w: %w", ErrReplicationUnknown, err)
	case errors.Is(err, replqueue.ErrBadCommand):
		return invalid("request", "%v", err)
	}
	return mapCursorErr(err)
}
