package replpart

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/memnet"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"go.etcd.io/raft/v3"
)

const testGroup multiraft.GroupID = 3

// tnode is one node: its engine and its local log survive a kill (each keeping only what
// it made durable), its host, machine and partition do not.
type tnode struct {
	id   multiraft.NodeID
	disk disk
	log  *fakeLog
	host *multiraft.Host
	sm   *Machine
	part *Partition
	up   bool
	made bool // the group exists on its disk
}

// cluster is n hosts over a hand-stepped memnet network with one partition group.
type cluster struct {
	t     testing.TB
	net   *memnet.Network
	ids   []multiraft.NodeID
	nodes map[multiraft.NodeID]*tnode
	cfg   multiraft.Config
	// snapsSent sums the snapshots the hosts sent, over every run of every host.
	snapsSent uint64
	chunk     int // Source.ChunkBytes of every machine (0: the default)
	// tolerateNoSource: a start whose pull finds no peer leaves the node down instead of
	// failing the test.
	tolerateNoSource bool
	// clock is every node's wall clock (cursor entries' stamps); tick advances it by
	// tickTime.
	clock    time.Time
	tickTime time.Duration
	// capture: every machine's log captures its checkpoints, made durable by the
	// snapshot's encoding off the Ready loop (CheckpointCapturer).
	capture bool
	// unsyncedKept, if set, is how many batches applied past its last checkpoint a killed
	// node's log still holds (fakeLog.crashKeeping); unset, none.
	unsyncedKept func() int
}

func newCluster(t testing.TB, seed int64, n int, opts ...func(*cluster)) *cluster {
	return newClusterOn(t, seed, n, newMemDisk, opts...)
}

// chunked makes every machine pull in chunks of about n bytes.
func chunked(n int) func(*cluster) { return func(c *cluster) { c.chunk = n } }

// newClusterOn is newCluster with every node's Raft storage made by newDisk; opts change
// the cluster before its nodes start.
func newClusterOn(t testing.TB, seed int64, n int, newDisk func(multiraft.NodeID) disk, opts ...func(*cluster)) *cluster {
	c := &cluster{t: t, net: memnet.New(seed), nodes: map[multiraft.NodeID]*tnode{},
		cfg:   multiraft.Config{ElectionTicks: 10, HeartbeatTicks: 1, SnapshotEntries: 20},
		clock: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), tickTime: 100 * time.Millisecond}
	for _, o := range opts {
		o(c)
	}
	for i := 1; i <= n; i++ {
		c.ids = append(c.ids, multiraft.NodeID(i))
	}
	for _, id := range c.ids {
		c.nodes[id] = &tnode{id: id, disk: newDisk(id), log: &fakeLog{}}
		c.start(id)
	}
	return c
}

func (c *cluster) start(id multiraft.NodeID) {
	nd := c.nodes[id]
	cfg := c.cfg
	eng, err := nd.disk.engine()
	if err != nil {
		c.t.Fatalf("n%d: open its disk: %v", id, err)
	}
	cfg.Node, cfg.Engine, cfg.Transport, cfg.Peers = id, eng, c.net.Transport(id), c.ids
	h, err := multiraft.New(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	var log Log = nd.log
	if c.capture {
		log = capturingLog{nd.log}
	}
	sm := NewMachine(id, log)
	sm.SetSource(Source{Host: h, Group: testGroup, Peers: c.ids, ChunkBytes: c.chunk, Backoff: time.Millisecond})
	var voters []multiraft.NodeID
	if !nd.made {
		voters = c.ids
	}
	if err := h.CreateGroup(testGroup, voters, sm); err != nil {
		if errors.Is(err, ErrNoSource) && c.tolerateNoSource {
			// Its log lacks records of its snapshot and no peer is reachable (a
			// partition): it stays down, as the broker's reconciler retries later.
			h.Close()
			nd.made = true
			return
		}
		c.t.Fatalf("n%d: create group: %v", id, err)
	}
	nd.host, nd.sm, nd.part, nd.up, nd.made = h, sm, NewPartition(h, testGroup, sm), true, true
	nd.part.SetClock(func() time.Time { return c.clock })
	c.net.Attach(id, h)
}

// kill crashes a node: what its engine did not sync and what its log did not checkpoint
// are lost.
func (c *cluster) kill(id multiraft.NodeID) {
	nd := c.nodes[id]
	c.snapsSent += nd.host.Stats().SnapsSent
	nd.host.Close()
	c.net.Detach(id)
	if err := nd.disk.crash(); err != nil {
		c.t.Fatal(err)
	}
	keep := 0
	if c.unsyncedKept != nil {
		keep = c.unsyncedKept()
	}
	nd.log.crashKeeping(keep)
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
	c.clock = c.clock.Add(c.tickTime)
	c.net.Advance()
	c.settle()
}

func (c *cluster) settle() {
	for range 100 {
		c.waitPrepared()
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

// waitPrepared waits (bounded) until no host prepares a snapshot: a preparation pulls on a
// goroutine of its own, and the schedule must not depend on how fast it ran.
func (c *cluster) waitPrepared() {
	for _, nd := range c.up() {
		for i := 0; nd.host.BackgroundWork() > 0; i++ {
			if i == 20000 {
				c.t.Fatalf("n%d: a snapshot preparation did not end in 2 s", nd.id)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
}

// leader is the up node that leads in the highest term, or 0.
func (c *cluster) leader() multiraft.NodeID {
	var best multiraft.NodeID
	var term uint64
	for _, nd := range c.up() {
		st, err := nd.host.Status(testGroup)
		if err == nil && st.Role == raft.StateLeader && st.Term >= term {
			best, term = nd.id, st.Term
		}
	}
	return best
}

// elect ticks until an up node other than those in not leads (bounded).
func (c *cluster) elect(not ...multiraft.NodeID) multiraft.NodeID {
	for range 500 {
		if l := c.leader(); l != 0 && !slices.Contains(not, l) {
			return l
		}
		c.tick()
	}
	c.t.Fatalf("no leader after 500 ticks (excluding %v)", not)
	return 0
}

// appendAt appends batches through node at's Partition, ticking until it answers.
func (c *cluster) appendAt(at multiraft.NodeID, batches ...string) ([]BatchResult, error) {
	var bs [][]byte
	for _, b := range batches {
		bs = append(bs, []byte(b))
	}
	cl, err := c.nodes[at].part.start(bs)
	if err != nil {
		return nil, err
	}
	for i := 0; ; i++ {
		select {
		case <-cl.p.Done():
			return c.nodes[at].part.finish(cl)
		default:
		}
		if i == 200 {
			c.t.Fatalf("n%d: append not answered in 200 ticks", at)
		}
		c.tick()
	}
}

// mustAppend appends on the leader and fails the test on any error.
func (c *cluster) mustAppend(batches ...string) []BatchResult {
	l := c.elect()
	rs, err := c.appendAt(l, batches...)
	if err != nil {
		c.t.Fatalf("append on n%d: %v", l, err)
	}
	return rs
}

// sentSnapshots is how many snapshots every host sent so far, killed ones included.
func (c *cluster) sentSnapshots() uint64 {
	n := c.snapsSent
	for _, nd := range c.up() {
		n += nd.host.Stats().SnapsSent
	}
	return n
}

// converge ticks until every up node's log holds what the leader's does (bounded), and
// returns that log.
func (c *cluster) converge() []rec {
	for range 300 {
		l := c.elect()
		want := c.nodes[l].log.snapshot()
		same := true
		for _, nd := range c.up() {
			same = same && slices.Equal(nd.log.snapshot(), want)
		}
		if same {
			return want
		}
		c.tick()
	}
	l := c.leader()
	for _, nd := range c.up() {
		if got, want := nd.log.snapshot(), c.nodes[l].log.snapshot(); !slices.Equal(got, want) {
			st, _ := nd.host.Status(testGroup)
			lst, _ := c.nodes[l].host.Status(testGroup)
			c.t.Fatalf("n%d's log differs from leader n%d's after 300 ticks:\n%s\nits group: %+v, pulls %+v\nthe leader's: %+v", nd.id, l, diff(got, want),
				st, nd.sm.PullStats(), lst)
		}
	}
	return nil
}

func diff(got, want []rec) string {
	for i := range max(len(got), len(want)) {
		switch {
		case i >= len(got):
			return fmt.Sprintf("missing from %d: %+v (%d records vs %d)", i, want[i], len(got), len(want))
		case i >= len(want):
			return fmt.Sprintf("extra from %d: %+v", i, got[i])
		case got[i] != want[i]:
			return fmt.Sprintf("at %d: %+v, leader %+v", i, got[i], want[i])
		}
	}
	return "equal"
}
