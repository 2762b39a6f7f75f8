package multiraft_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/memnet"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"go.etcd.io/raft/v3"
)

// recorder is the test state machine: the entries it applied, in order.
type recorder struct {
	mu   sync.Mutex
	ents []multiraft.Entry
}

func (r *recorder) Apply(ents []multiraft.Entry) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range ents {
		if n := len(r.ents); n > 0 && r.ents[n-1].Index >= e.Index {
			return fmt.Errorf("entry %d applied after %d", e.Index, r.ents[n-1].Index)
		}
		r.ents = append(r.ents, multiraft.Entry{Index: e.Index, Term: e.Term, Data: slices.Clone(e.Data)})
	}
	return nil
}

func (r *recorder) Snapshot() ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return json.Marshal(r.ents)
}

func (r *recorder) Restore(b []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ents = nil
	if len(b) == 0 {
		return nil
	}
	return json.Unmarshal(b, &r.ents)
}

func (r *recorder) entries() []multiraft.Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ents)
}

// tnode is one node of a test cluster: its host, its storage (which survives a kill) and
// its state machines (which do not).
type tnode struct {
	id     multiraft.NodeID
	host   *multiraft.Host
	disk   disk
	sms    map[multiraft.GroupID]*recorder
	groups []multiraft.GroupID // hosted, to reopen on restart
	up     bool
	clock  *testClock // the host's Sleeper when the cluster is sleepy
}

// testClock is the Sleeper of a host in a sleepy cluster: the cluster's tick count, and
// the tick the host asked to be woken at.
type testClock struct {
	c     *cluster
	off   uint64 // added to the cluster's ticks: where the host's clock stands among others
	armed uint64
	fired int // ticks the host took: its Run loop's wake-ups by the clock
}

func (k *testClock) C() <-chan time.Time { return nil }
func (k *testClock) Stop()               {}
func (k *testClock) Now() uint64         { return k.c.ticks + k.off }
func (k *testClock) Until(n uint64)      { k.armed = n }

type ack struct {
	term uint64
	data string
	node multiraft.NodeID
}

// cluster is several hosts over one memnet network, stepped by hand: deterministic but
// for raft's own randomised election timeouts (go.etcd.io/raft draws them from
// crypto/rand and offers no way to seed them).
type cluster struct {
	t     testing.TB
	net   *memnet.Network
	ids   []multiraft.NodeID
	nodes map[multiraft.NodeID]*tnode
	cfg   multiraft.Config
	ticks uint64
	// sleepy: every host is driven as Run drives it with a Sleeper (sleep.go), ticked
	// only at the ticks it asks for, rather than on every tick.
	sleepy bool
	// noChecks skips the per-round leader check (benchmarks measure the hosts alone).
	noChecks bool
	// capture: the recorders' snapshots are captured and encoded off the Ready loop
	// (multiraft.SnapshotCapturer). An encoding waits for the gate open when it was
	// captured, which every third tick and every kill release: so encodings span rounds
	// in which the groups apply more, and end at points the schedule decides.
	capture   bool
	gate      chan struct{}
	syncKills int // nodes stopped by an injected sync failure or a disk cut mid-round

	leaders map[multiraft.GroupID]map[uint64]multiraft.NodeID // term -> the leader seen
	acked   map[multiraft.GroupID]map[uint64]ack              // index -> what was acknowledged
}

func newCluster(t testing.TB, seed int64, n int, cfg multiraft.Config) *cluster {
	return newClusterOn(t, seed, n, cfg, newMemDisk)
}

// newClusterOn is newCluster with every node's disk made by newDisk.
func newClusterOn(t testing.TB, seed int64, n int, cfg multiraft.Config, newDisk func(multiraft.NodeID) disk) *cluster {
	c := &cluster{t: t, net: memnet.New(seed), nodes: map[multiraft.NodeID]*tnode{}, cfg: cfg,
		leaders: map[multiraft.GroupID]map[uint64]multiraft.NodeID{},
		acked:   map[multiraft.GroupID]map[uint64]ack{}}
	for i := 1; i <= n; i++ {
		c.ids = append(c.ids, multiraft.NodeID(i))
	}
	for _, id := range c.ids {
		c.nodes[id] = &tnode{id: id, disk: newDisk(id)}
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
	cfg.Node, cfg.Engine, cfg.Transport = id, eng, c.net.Transport(id)
	cfg.Peers = c.ids
	h, err := multiraft.New(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	nd.host, nd.up, nd.sms = h, true, map[multiraft.GroupID]*recorder{}
	nd.clock = &testClock{c: c}
	for _, g := range nd.groups {
		nd.sms[g] = &recorder{}
		if err := h.CreateGroup(g, nil, c.machine(nd.sms[g])); err != nil {
			c.t.Fatalf("n%d: reopen group %d: %v", id, g, err)
		}
	}
	c.net.Attach(id, h)
}

// createGroup creates group g on the given nodes; voters bootstraps it (nil: the nodes
// join later through a membership change).
func (c *cluster) createGroup(g multiraft.GroupID, on, voters []multiraft.NodeID) {
	for _, id := range on {
		nd := c.nodes[id]
		nd.sms[g] = &recorder{}
		if err := nd.host.CreateGroup(g, voters, c.machine(nd.sms[g])); err != nil {
			if nd.disk.cut() { // the disk died under the creation: a power cut
				delete(nd.sms, g)
				c.kill(id)
				continue
			}
			c.t.Fatalf("n%d: create group %d: %v", id, g, err)
		}
		nd.groups = append(nd.groups, g)
	}
}

// machine is the state machine over rec that the cluster's hosts are given.
func (c *cluster) machine(rec *recorder) multiraft.StateMachine {
	if c.capture {
		return capturingRecorder{rec, c}
	}
	return rec
}

// capturingRecorder is a recorder whose snapshots are captured (a copy of the entries)
// and encoded off the Ready loop once the cluster's gate of the moment opens.
type capturingRecorder struct {
	*recorder
	c *cluster
}

func (r capturingRecorder) CaptureSnapshot() (func() ([]byte, error), error) {
	ents, gate := r.entries(), r.c.gate
	return func() ([]byte, error) {
		<-gate
		return json.Marshal(ents)
	}, nil
}

// releaseEncodings lets every encoding captured so far end, and waits until they have.
func (c *cluster) releaseEncodings() {
	close(c.gate)
	c.gate = make(chan struct{})
	c.waitEncodings()
}

// kill crashes a node: its host and state machines are gone, its storage keeps what was
// synced.
func (c *cluster) kill(id multiraft.NodeID) {
	nd := c.nodes[id]
	if c.capture {
		c.releaseEncodings() // Close waits for them
	}
	nd.host.Close()
	c.net.Detach(id)
	if err := nd.disk.crash(); err != nil {
		c.t.Fatal(err)
	}
	nd.up = false
}

func (c *cluster) restart(id multiraft.NodeID) { c.start(id) }

// wipe kills a node and loses its disk: it restarts (restart) on an empty one, under its
// old node ID, reopening its groups as a restart does (with no voters).
func (c *cluster) wipe(id multiraft.NodeID) {
	if c.nodes[id].up {
		c.kill(id)
	}
	c.nodes[id].disk.wipe()
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

// tick moves every live host and the network one tick, then settles. In a sleepy
// cluster a host is first told of the work done on it since its last tick (Run's Woken:
// harmless when there was none) and asked which tick it wants next, and is ticked only if
// that tick has come.
func (c *cluster) tick() {
	if c.sleepy {
		for _, nd := range c.up() {
			nd.host.Woken(nd.clock)
			nd.clock.Until(nd.host.Arm(nd.clock))
		}
	}
	c.ticks++
	if c.capture && c.ticks%3 == 0 {
		c.releaseEncodings()
	}
	for _, nd := range c.up() {
		switch {
		case !c.sleepy:
			nd.host.Tick()
		case nd.clock.armed <= nd.clock.Now():
			nd.clock.fired++
			nd.host.Fired(nd.clock)
		}
	}
	c.net.Advance()
	c.settle()
}

// settle runs Ready rounds and deliveries until nothing moves (bounded).
func (c *cluster) settle() {
	for range 100 {
		moved := c.net.Deliver() > 0
		for _, nd := range c.up() {
			worked, err := nd.host.ProcessReady()
			if errors.Is(err, multiraft.ErrInjectedSync) || nd.disk.cut() {
				// a failed sync stops the node; it restarts from what was synced before
				c.kill(nd.id)
				c.syncKills++
				continue
			}
			if err != nil {
				c.t.Fatalf("n%d: %v", nd.id, err)
			}
			moved = moved || worked
		}
		if !c.noChecks {
			c.checkLeaders()
		}
		if !moved {
			return
		}
	}
}

// checkLeaders fails the test if two nodes lead one group in one term.
func (c *cluster) checkLeaders() {
	for _, nd := range c.up() {
		for _, g := range nd.groups {
			st, err := nd.host.Status(g)
			if err != nil || st.Role != raft.StateLeader {
				continue
			}
			c.sawLeader(g, st.Term, nd.id)
		}
	}
}

func (c *cluster) sawLeader(g multiraft.GroupID, term uint64, id multiraft.NodeID) {
	m := c.leaders[g]
	if m == nil {
		m = map[uint64]multiraft.NodeID{}
		c.leaders[g] = m
	}
	if prev, ok := m[term]; ok && prev != id {
		c.t.Errorf("group %d term %d: two leaders, n%d and n%d", g, term, prev, id)
	}
	m[term] = id
}

// await ticks until p is done or within ticks pass.
func (c *cluster) await(p *multiraft.Proposal, within int) bool {
	for i := 0; ; i++ {
		select {
		case <-p.Done():
			return true
		default:
		}
		if i == within {
			return false
		}
		c.tick()
	}
}

// record notes an acknowledged proposal and the leader that acknowledged it.
func (c *cluster) record(g multiraft.GroupID, id multiraft.NodeID, index uint64, data string) {
	nd := c.nodes[id]
	var term uint64
	for _, e := range nd.sms[g].entries() {
		if e.Index == index {
			term = e.Term
		}
	}
	if c.acked[g] == nil {
		c.acked[g] = map[uint64]ack{}
	}
	if prev, ok := c.acked[g][index]; ok {
		c.t.Errorf("group %d index %d acknowledged twice: %q and %q", g, index, prev.data, data)
	}
	c.acked[g][index] = ack{term: term, data: data, node: id}
	c.sawLeader(g, term, id)
}

// leader returns the node that leads g at the highest term among live nodes, if any.
func (c *cluster) leader(g multiraft.GroupID) (multiraft.NodeID, uint64) {
	var lead multiraft.NodeID
	var term uint64
	for _, nd := range c.up() {
		st, err := nd.host.Status(g)
		if err == nil && st.Role == raft.StateLeader && st.Term >= term {
			lead, term = nd.id, st.Term
		}
	}
	return lead, term
}

// checkSafety: every acknowledged entry is applied, at its index with its data, on every
// live member that applied that far, and live members' applied logs agree where they
// overlap. With converged, every voter of the current leader's configuration must also
// have applied every acknowledged entry (a node removed while cut off never learns it was,
// and rightly never catches up).
func (c *cluster) checkSafety(converged bool) error {
	for g, acks := range c.acked {
		var voters []multiraft.NodeID
		if lead, _ := c.leader(g); lead != 0 {
			st, _ := c.nodes[lead].host.Status(g)
			voters = st.Voters
		}
		var ref map[uint64]string
		for _, nd := range c.up() {
			sm := nd.sms[g]
			if sm == nil {
				continue
			}
			st, err := nd.host.Status(g)
			if err != nil || st.Removed {
				continue
			}
			got := map[uint64]string{}
			var last uint64
			for _, e := range sm.entries() {
				got[e.Index], last = string(e.Data), e.Index
			}
			for i, a := range acks {
				d, ok := got[i]
				switch {
				case ok && d != a.data:
					return fmt.Errorf("group %d n%d: index %d holds %q, acknowledged %q", g, nd.id, i, d, a.data)
				case !ok && i <= last:
					return fmt.Errorf("group %d n%d: acknowledged index %d (%q) missing", g, nd.id, i, a.data)
				case !ok && converged && slices.Contains(voters, nd.id):
					return fmt.Errorf("group %d n%d: acknowledged index %d (%q) not applied after healing (applied %d)", g, nd.id, i, a.data, last)
				}
			}
			if ref == nil {
				ref = got
				continue
			}
			for i, d := range got {
				if r, ok := ref[i]; ok && r != d {
					return fmt.Errorf("group %d: index %d differs between nodes: %q and %q", g, i, r, d)
				}
			}
		}
	}
	return nil
}
