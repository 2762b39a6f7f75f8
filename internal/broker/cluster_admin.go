package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
)

// catalogTimeout bounds a catalog change: a commit of the metadata group, which has a
// leader unless an election is on.
const catalogTimeout = 10 * time.Second

// createTopic proposes a topic to the catalog and returns once this node has it.
func (c *clusterRT) createTopic(s TopicSettings) (TopicSettings, error) {
	s.CreatedAt = c.b.now()
	settings, err := json.Marshal(s)
	if err != nil {
		return TopicSettings{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), catalogTimeout)
	defer cancel()
	rf := s.Replication
	if rf <= 0 {
		rf = c.defaultReplication()
	}
	if _, err := c.cat.CreateTopic(ctx, s.Name, s.Partitions, rf, settings); err != nil {
		return TopicSettings{}, c.catalogErr(err)
	}
	return c.local(s.Name)
}

func (c *clusterRT) deleteTopic(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), catalogTimeout)
	defer cancel()
	if err := c.cat.DeleteTopic(ctx, name); err != nil {
		return c.catalogErr(err)
	}
	c.reconcile()
	return nil
}

func (c *clusterRT) addPartitions(name string, total int32) (string, error) {
	if total > MaxPartitions {
		return "", invalid("partitions", "%d: want at most %d", total, MaxPartitions)
	}
	ctx, cancel := context.WithTimeout(context.Background(), catalogTimeout)
	defer cancel()
	if _, err := c.cat.AddPartitions(ctx, name, total); err != nil {
		return "", c.catalogErr(err)
	}
	if _, err := c.local(name); err != nil {
		return "", err
	}
	return AddPartitionsWarning, nil
}

// updateTopic computes the new settings as a single node would, then proposes them.
func (c *clusterRT) updateTopic(name string, fn func(*TopicSettings) error) (TopicSettings, error) {
	next, err := c.b.updateTopicLocal(name, true, fn)
	if err != nil {
		return TopicSettings{}, err
	}
	settings, err := json.Marshal(next)
	if err != nil {
		return TopicSettings{}, err
	}
	if ct, ok := c.clusteredTopic(name); ok { // keep its subscriptions (cluster_subs.go)
		subs, err := subsOf(ct)
		if err != nil {
			return TopicSettings{}, err
		}
		if settings, err = withSubs(settings, subs); err != nil {
			return TopicSettings{}, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), catalogTimeout)
	defer cancel()
	if _, err := c.cat.UpdateTopic(ctx, name, settings); err != nil {
		return TopicSettings{}, c.catalogErr(err)
	}
	return c.local(name)
}

// local brings this node in step with the catalog and returns the topic's settings here.
func (c *clusterRT) local(name string) (TopicSettings, error) {
	c.reconcile()
	t, err := c.b.streams.topic(name)
	if err != nil {
		return TopicSettings{}, err
	}
	s, _ := t.snapshot()
	return s, nil
}

// catalogErr maps the catalog's refusals to the broker's errors.
func (c *clusterRT) catalogErr(err error) error {
	var nl *meta.NotLeaderError
	switch {
	case errors.As(err, &nl):
		return &NotLeaderError{What: "the catalog", Catalog: true, Leader: int32(nl.Leader)}
	case errors.Is(err, meta.ErrTopicExists):
		return ErrTopicExists
	case errors.Is(err, meta.ErrUnknownTopic):
		return ErrTopicNotFound
	case errors.Is(err, meta.ErrReplicationFactor):
		return c.replicationErr(err)
	case errors.Is(err, meta.ErrPartitions):
		return invalid("partitions", "%v", err)
	}
	return err
}

// replicationErr is the refusal of a replication factor the registered nodes cannot hold.
// While some nodes of the cluster have not registered (they register within a second of
// starting, once the metadata group has a leader; a node whose peers are down has none)
// it is a refusal to retry, as the docs promise — a create made a moment after the
// cluster started — and only then an invalid argument.
func (c *clusterRT) replicationErr(err error) error {
	registered := len(c.meta.State().Nodes)
	members := 0
	if st, serr := c.host.Status(meta.Group); serr == nil {
		members = len(st.Voters) + len(st.Learners)
	}
	if registered == 0 || registered < members {
		return &NotLeaderError{What: "the catalog", Catalog: true,
			Why: fmt.Sprintf("%d of the cluster's %d nodes registered so far (%v); retry", registered, members, err)}
	}
	return invalid("replication_factor", "%v", err)
}

// defaultReplication is the replication factor of a topic or queue created without one:
// min(3, the cluster's nodes), counted as the metadata group's voters (every node of
// --cluster-peers), not the nodes registered so far. A create made before every node
// registered is then refused (retried by the client) rather than placed on fewer
// replicas for good.
func (c *clusterRT) defaultReplication() int {
	st, err := c.host.Status(meta.Group)
	if err != nil || len(st.Voters) == 0 {
		return 0 // the catalog's own default
	}
	return min(3, len(st.Voters))
}
