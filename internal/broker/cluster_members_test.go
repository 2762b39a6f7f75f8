package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/group"
)

// join starts node id empty, to be added to the running cluster: it knows every member's
// address, the members learn its own from the catalog (AddNode, cluster_moves.go).
func (c *qcluster) join(id multiraft.NodeID) *qnode {
	nd := &qnode{id: id, addr: freeLoopback(c.t), eng: multiraft.NewMemEngine(), join: true}
	c.nodes[id] = nd
	c.ids = append(c.ids, id)
	c.start(id, true)
	return nd
}

// groupMembers is group g's configuration as node nd applied it.
func groupMembers(nd *qnode, g multiraft.GroupID) (multiraft.Membership, error) {
	return nd.host.Membership(g)
}

func sameSet(a, b []multiraft.NodeID) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// A node joins a running cluster: the metadata group takes it as a learner, a rebalance
// moves a queue replica (with its messages) onto it. Then a node is removed: its replicas
// (the queue's and an empty partition's) move off it, the queue's leader crashing once
// during the move, the joined node becomes a metadata voter in its place. No
// unacknowledged message is lost and no acknowledged one comes back.
func TestClusterMembershipJoinAndRemove(t *testing.T) {
	c := newQCluster(t, 3)
	ctx := context.Background()
	l := c.metaLeader()
	if _, err := l.b.CreateQueue(QueueSettings{Name: "jobs", VisibilityTimeout: time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.b.CreateTopic(TopicSettings{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	// Three nodes, three replicas: no node can go.
	var ia *InvalidArgumentError
	if err := c.nodes[2].b.RemoveNode(ctx, 3); !errors.As(err, &ia) || !errors.Is(err, meta.ErrNoQuorum) {
		t.Fatalf("remove with nowhere to move to: %v", err)
	}
	ql := c.queueLeader("jobs")
	for i := range 20 {
		sendOne(t, ql.b, "jobs", fmt.Sprint("m", i))
	}
	ds, err := ql.b.Receive(ctx, "jobs", ReceiveOptions{Max: 10, Visibility: time.Minute})
	if err != nil || len(ds) != 10 {
		t.Fatalf("receive: %d %v", len(ds), err)
	}
	acked := map[string]bool{}
	for _, d := range ds[:5] {
		if err := ql.b.Ack(ctx, "jobs", d.Receipt); err != nil {
			t.Fatal(err)
		}
		acked[string(d.Body)] = true
	}
	for _, d := range ds[5:] { // released: only acked messages leave the queue
		if err := ql.b.Nack(ctx, "jobs", d.Receipt, 0, ""); err != nil {
			t.Fatal(err)
		}
	}

	// A consumer group's offset committed before node 4 exists: node 4 must have it
	// (the metadata snapshot it is seeded with carries the offsets).
	c.eventually("an offset committed", func() error {
		errs, err := c.metaLeader().b.CommitOffsets(ctx, group.CommitRequest{Group: "g", Generation: -1,
			Offsets: []group.OffsetCommit{{Topic: "t", Partition: 0, Offset: 42, LeaderEpoch: -1}}})
		if err == nil && errs[0] != nil {
			err = errs[0]
		}
		return err
	})

	// Node 4 joins. Until it is added it has no catalog, and says so on /readyz.
	n4 := c.join(4)
	if err := n4.b.Health(); err == nil || !strings.Contains(err.Error(), "add-node") {
		t.Fatalf("node 4 before add-node: health %v, want not ready", err)
	}
	actx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := c.nodes[2].b.AddNode(actx, 4, n4.addr); err != nil { // a follower's call is forwarded
		t.Fatal(err)
	}
	if err := c.nodes[1].b.AddNode(ctx, 4, "elsewhere:1"); !errors.As(err, &ia) {
		t.Fatalf("the same id at another address: %v", err)
	}
	c.eventually("node 4 registers", func() error {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return n4.cat.RegisterNode(rctx, meta.Node{ID: 4, SQSAddr: "sqs-4"})
	})
	c.eventually("node 4 a metadata learner, a queue replica moved onto it", func() error {
		ms, err := groupMembers(c.metaLeader(), meta.Group)
		if err != nil || !sameSet(ms.Voters, []multiraft.NodeID{1, 2, 3}) || !slices.Contains(ms.Learners, 4) {
			return fmt.Errorf("metadata group: %+v %v", ms, err)
		}
		q := n4.meta.State().Queues["jobs"]
		if q == nil || !slices.Contains(q.Replicas, 4) || q.Old != nil {
			return fmt.Errorf("queue: %+v", q)
		}
		if h := n4.b.cluster.hostedQueue("jobs"); h == nil || h.sm.Depth().Visible != 15 {
			return errors.New("node 4 does not hold the queue's 15 messages")
		}
		return nil
	})
	if err := n4.b.Health(); err != nil {
		t.Fatalf("node 4 holding replicas: health %v", err)
	}
	if got, ok := n4.b.FetchOffset("g", "t", 0); !ok || got.Offset != 42 {
		t.Fatalf("node 4's committed offset of g: %+v %v, want 42", got, ok)
	}
	// Each node hosts the queue exactly when it is a replica. A node applies the move's end
	// and stops hosting in its own reconcile round, after node 4 saw it: so eventually.
	q := n4.meta.State().Queues["jobs"]
	c.eventually("the queue hosted by its replicas only", func() error {
		for _, id := range []multiraft.NodeID{1, 2, 3} {
			replica, hosts := slices.Contains(q.Replicas, id), c.nodes[id].b.cluster.hostedQueue("jobs") != nil
			if replica != hosts {
				return fmt.Errorf("node %d hosts the queue: %v, its replicas %v", id, hosts, q.Replicas)
			}
		}
		return nil
	})

	// Node 2 is removed; the queue's leader crashes while its replica moves.
	if err := c.nodes[3].b.RemoveNode(ctx, 2); err != nil {
		t.Fatal(err)
	}
	c.eventually("a move in progress", func() error {
		if len(c.nodes[3].meta.State().Moving()) == 0 {
			return errors.New("none")
		}
		return nil
	})
	crashed := c.queueLeader("jobs")
	c.stop(crashed.id)
	time.Sleep(300 * time.Millisecond)
	c.start(crashed.id, false)
	c.eventually("node 2 out of everything", func() error {
		st := c.nodes[3].meta.State()
		if st.Holds(2) || len(st.Moving()) > 0 {
			return fmt.Errorf("moves %+v", st.Moving())
		}
		ms, err := groupMembers(c.metaLeader(), meta.Group)
		if err != nil || !sameSet(ms.Voters, []multiraft.NodeID{1, 3, 4}) || len(ms.Learners) > 0 {
			return fmt.Errorf("metadata group: %+v %v", ms, err)
		}
		for _, g := range st.Groups() {
			for _, id := range g.Replicas {
				m, err := groupMembers(c.nodes[id], g.Group)
				if err != nil || !sameSet(m.Voters, g.Replicas) || len(m.Learners) > 0 {
					return fmt.Errorf("%s on node %d: %+v %v, want %v", g.What(), id, m, err, g.Replicas)
				}
			}
		}
		// A removed node that knows it says so on /readyz. (It may not know: removed from
		// the metadata group while it was down — the queue leader crashed above may be it —
		// it is never sent the entry.)
		if c.nodes[2].meta.State().Removed[2] {
			if err := c.nodes[2].b.Health(); err == nil || !strings.Contains(err.Error(), "removed") {
				return fmt.Errorf("node 2 knows it was removed: health %v", err)
			}
		}
		// Node 2 is in no group's configuration (it may not learn that the last changes
		// committed, since it is no longer sent the log: the operator stops it).
		for _, g := range append(st.Groups(), meta.GroupPlacement{Group: meta.Group, Replicas: []multiraft.NodeID{1}}) {
			m, err := groupMembers(c.nodes[g.Replicas[0]], g.Group)
			if err != nil || slices.Contains(m.Voters, 2) || slices.Contains(m.Learners, 2) || slices.Contains(m.Outgoing, 2) {
				return fmt.Errorf("%s: node 2 still a member: %+v %v", g.What(), m, err)
			}
		}
		return nil
	})

	// The queue's leadership goes to its preferred replica (the catalog's first) once that
	// one is caught up, as a partition's does (balanceLeaders runs every 10 s; called here). Node 2 led it and its replica went
	// to node 1, now the first: leadership went to another voter in the move, then to 1.
	q = c.nodes[3].meta.State().Queues["jobs"]
	c.eventually("the queue led by its preferred replica", func() error {
		l := c.queueLeader("jobs")
		if l.id == q.Replicas[0] {
			return nil
		}
		l.b.cluster.balanceQueueLeaders()
		return fmt.Errorf("led by %d, preferred %d", l.id, q.Replicas[0])
	})
	t.Logf("queue replicas %v, led by its preferred replica", q.Replicas)

	// Every message not acknowledged is still there, and no acknowledged one came back.
	nl := c.queueLeader("jobs")
	got := map[string]bool{}
	deadline := time.Now().Add(20 * time.Second)
	for len(got) < 15 && time.Now().Before(deadline) {
		ds, err := nl.b.Receive(ctx, "jobs", ReceiveOptions{Max: 10, Wait: 500 * time.Millisecond, Visibility: time.Minute})
		if err != nil {
			nl = c.queueLeader("jobs")
			continue
		}
		for _, d := range ds {
			if acked[string(d.Body)] {
				t.Fatalf("acknowledged message %s delivered again", d.Body)
			}
			got[string(d.Body)] = true
		}
	}
	if len(got) != 15 {
		t.Fatalf("received %d of the 15 unacknowledged messages: %v", len(got), got)
	}
}
