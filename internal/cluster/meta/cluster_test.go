package meta

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/memnet"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"go.etcd.io/raft/v3"
)

// tnode is one node: its engine survives a kill, its host, machine and catalog do not.
type tnode struct {
	id   multiraft.NodeID
	eng  *multiraft.MemEngine
	host *multiraft.Host
	sm   *Machine
	cat  *Catalog
	up   bool
	made bool // the group exists on its disk
}

// cluster is n hosts over a hand-stepped memnet network, each hosting the metadata group.
type cluster struct {
	t     testing.TB
	net   *memnet.Network
	ids   []multiraft.NodeID
	nodes map[multiraft.NodeID]*tnode
	cfg   multiraft.Config
}

func newCluster(t testing.TB, n int) *cluster {
	// A small SnapshotEntries: a restarted node reopens from a snapshot and the log tail.
	c := &cluster{t: t, net: memnet.New(1), nodes: map[multiraft.NodeID]*tnode{},
		cfg: multiraft.Config{ElectionTicks: 10, HeartbeatTicks: 1, SnapshotEntries: 4}}
	for i := 1; i <= n; i++ {
		c.ids = append(c.ids, multiraft.NodeID(i))
	}
	for _, id := range c.ids {
		c.nodes[id] = &tnode{id: id, eng: multiraft.NewMemEngine()}
		c.start(id)
	}
	return c
}

func (c *cluster) start(id multiraft.NodeID) {
	nd := c.nodes[id]
	cfg := c.cfg
	cfg.Node, cfg.Engine, cfg.Transport, cfg.Peers = id, nd.eng, c.net.Transport(id), c.ids
	h, err := multiraft.New(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	sm := NewMachine(id)
	var voters []multiraft.NodeID
	if !nd.made {
		voters = c.ids
	}
	if err := h.CreateGroup(Group, voters, sm); err != nil {
		c.t.Fatalf("n%d: create group: %v", id, err)
	}
	nd.host, nd.sm, nd.cat, nd.up, nd.made = h, sm, NewCatalog(h, sm), true, true
	c.net.Attach(id, h)
}

// kill crashes a node: what its engine did not sync is lost.
func (c *cluster) kill(id multiraft.NodeID) {
	nd := c.nodes[id]
	nd.host.Close()
	c.net.Detach(id)
	if err := nd.eng.Crash(); err != nil {
		c.t.Fatal(err)
	}
	nd.up = false
}

func (c *cluster) up() []*tnode {
	var out []*tnode
	for _, id := range c.ids {
		if c.nodes[id].up {
			out = append(out, c.nodes[id])
		}
	}
	return out
}

func (c *cluster) tick() {
	for _, nd := range c.up() {
		nd.host.Tick()
	}
	c.net.Advance()
	for range 100 {
		moved := c.net.Deliver() > 0
		for _, nd := range c.up() {
			worked, err := nd.host.ProcessReady()
			if err != nil {
				c.t.Fatalf("n%d: %v", nd.id, err)
			}
			moved = moved || worked
		}
		if !moved {
			return
		}
	}
}

// leader is the up node that leads in the highest term, or 0.
func (c *cluster) leader() multiraft.NodeID {
	var best multiraft.NodeID
	var term uint64
	for _, nd := range c.up() {
		st, err := nd.host.Status(Group)
		if err == nil && st.Role == raft.StateLeader && st.Term >= term {
			best, term = nd.id, st.Term
		}
	}
	return best
}

// elect ticks until a leader is known to every up node (bounded) and returns it.
func (c *cluster) elect() multiraft.NodeID {
	for range 500 {
		if l := c.leader(); l != 0 {
			agreed := true
			for _, nd := range c.up() {
				agreed = agreed && nd.cat.Leader() == l
			}
			if agreed {
				return l
			}
		}
		c.tick()
	}
	c.t.Fatal("no leader after 500 ticks")
	return 0
}

// call runs f (a blocking Catalog call) on its own goroutine while ticking the cluster,
// until it returns or 1000 ticks pass. Between ticks it gives the goroutine a moment: on a
// loaded machine the goroutine may not even have proposed yet after hundreds of ticks
// taken back to back (ticks are logical time; waiting costs only wall-clock time).
func (c *cluster) call(f func(ctx context.Context) error) error {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	for range 1000 {
		select {
		case err := <-done:
			return err
		case <-time.After(time.Millisecond):
		}
		c.tick()
	}
	cancel()
	err := <-done
	c.t.Fatalf("call did not return in 1000 ticks: %v", err)
	return err
}

// converge ticks until every up node's State equals want (bounded).
func (c *cluster) converge(want *State) {
	c.t.Helper()
	for range 300 {
		same := true
		for _, nd := range c.up() {
			same = same && reflect.DeepEqual(nd.sm.State(), want)
		}
		if same {
			return
		}
		c.tick()
	}
	for _, nd := range c.up() {
		c.t.Logf("n%d: %+v", nd.id, nd.sm.State())
	}
	c.t.Fatalf("states did not converge to %+v", want)
}

func TestCatalogOnThreeHosts(t *testing.T) {
	c := newCluster(t, 3)
	// Every node registers itself through its own Catalog, the first before any leader is
	// elected: it waits for one, and a follower's registration is forwarded to the leader.
	for _, id := range c.ids {
		n := Node{ID: id, KafkaAddr: fmt.Sprintf("n%d:9092", id), HTTPAddr: fmt.Sprintf("n%d:8080", id)}
		cat := c.nodes[id].cat
		if err := c.call(func(ctx context.Context) error { return cat.RegisterNode(ctx, n) }); err != nil {
			t.Fatalf("register n%d: %v", id, err)
		}
		if got, _ := c.nodes[id].sm.State().Node(id); got != n {
			t.Fatalf("n%d: RegisterNode returned with its State showing %+v", id, got)
		}
	}
	l := c.elect()
	if len(c.nodes[l].sm.State().Nodes) != 3 {
		t.Fatalf("leader's nodes: %+v", c.nodes[l].sm.State().Nodes)
	}
	var follower multiraft.NodeID
	for _, id := range c.ids {
		if id != l {
			follower = id
			break
		}
	}
	lcat, fcat := c.nodes[l].cat, c.nodes[follower].cat
	watch := c.nodes[follower].sm.Changed()

	// A follower forwards a topic change to the leader and returns once it sees it.
	var orders *Topic
	if err := c.call(func(ctx context.Context) (err error) {
		orders, err = fcat.CreateTopic(ctx, "orders", 6, 3, []byte(`{"x":1}`))
		return err
	}); err != nil {
		t.Fatalf("follower's CreateTopic: %v", err)
	}
	if _, ok := c.nodes[l].sm.State().Topics["orders"]; !ok {
		t.Fatal("the follower's create did not reach the leader")
	}
	if err := c.call(func(ctx context.Context) error {
		_, err := fcat.CreateTopic(ctx, "orders", 1, 1, nil)
		return err
	}); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("follower's second create: %v", err)
	}
	if len(orders.Partitions) != 6 || orders.ReplicationFactor() != 3 {
		t.Fatalf("created %+v", orders)
	}
	if err := c.call(func(ctx context.Context) error {
		_, err := lcat.CreateTopic(ctx, "orders", 1, 1, nil)
		return err
	}); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("second create: %v", err)
	}
	if err := c.call(func(ctx context.Context) error {
		_, err := lcat.CreateTopic(ctx, "wide", 1, 4, nil)
		return err
	}); !errors.Is(err, ErrReplicationFactor) {
		t.Fatalf("rf 4 on 3 nodes: %v", err)
	}
	c.converge(c.nodes[l].sm.State())
	select {
	case <-watch:
	default:
		t.Fatal("the follower's Changed did not fire")
	}
	if got := c.nodes[follower].sm.State().Topics["orders"]; !reflect.DeepEqual(got, orders) {
		t.Fatalf("follower holds %+v, leader created %+v", got, orders)
	}

	// Kill the leader; the others elect a new one, which creates.
	old := l
	c.kill(old)
	l = c.elect()
	if l == old {
		t.Fatal("the killed node leads")
	}
	if err := c.call(func(ctx context.Context) error {
		_, err := c.nodes[l].cat.CreateTopic(ctx, "events", 3, 0, nil)
		return err
	}); err != nil {
		t.Fatalf("create on the new leader: %v", err)
	}
	if err := c.call(func(ctx context.Context) error {
		_, err := c.nodes[l].cat.AddPartitions(ctx, "orders", 9)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.call(func(ctx context.Context) error { return c.nodes[l].cat.DeleteTopic(ctx, "orders") }); err != nil {
		t.Fatal(err)
	}
	want := c.nodes[l].sm.State()
	if ev := want.Topics["events"]; ev == nil || ev.ReplicationFactor() != 3 || want.Topics["orders"] != nil ||
		want.NextGroup != FirstDataGroup+6+3+3 {
		t.Fatalf("state after failover: %+v", want)
	}
	c.converge(want)

	// Restart the old leader from its engine: it reopens from its snapshot (taken every 4
	// entries), then catches up.
	c.start(old)
	if st := c.nodes[old].sm.State(); st.Index == 0 || len(st.Nodes) != 3 {
		t.Fatalf("restarted node reopened with %+v, not its snapshot", st)
	}
	c.converge(want)
	if err := c.call(func(ctx context.Context) error {
		_, err := c.nodes[l].cat.UpdateTopic(ctx, "events", []byte(`{"y":2}`))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	c.converge(c.nodes[l].sm.State())
}

// A call whose caller stops waiting reports an unknown outcome, and the entry may still
// apply (State tells); a call on a stopped host is an unknown outcome too.
func TestCatalogOutcomeUnknown(t *testing.T) {
	c := newCluster(t, 3)
	l := c.elect()
	cat := c.nodes[l].cat
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// Proposed, then the wait ends at once: no tick has run, so the entry is not applied.
	if err := cat.RegisterNode(ctx, Node{ID: 7}); !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	for range 50 {
		c.tick()
	}
	if _, ok := c.nodes[l].sm.State().Node(7); !ok {
		t.Fatal("the entry of the abandoned call was not applied")
	}
	c.kill(l)
	if _, err := cat.CreateTopic(context.Background(), "t", 1, 1, nil); !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("call on a stopped host: %v", err)
	}
	if _, err := cat.CreateTopic(context.Background(), "no/slash", 1, 1, nil); !errors.Is(err, ErrInvalidTopicName) {
		t.Fatalf("bad name: %v", err)
	}
}
