package replqueue

import (
	"errors"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/memnet"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/queue"
	"go.etcd.io/raft/v3"
)

const testGroup multiraft.GroupID = 7

// tickDur is how much wall-clock time one harness tick stands for on every node's clock.
const tickDur = 10 * time.Millisecond

// tnode is one node: its engine survives a kill, its host, machine and queue do not.
type tnode struct {
	id   multiraft.NodeID
	eng  *multiraft.MemEngine
	host *multiraft.Host
	sm   *Machine
	q    *Queue
	up   bool
	made bool          // the group exists on its disk
	skew time.Duration // added to this node's clock
}

// cluster is three (or n) hosts over a hand-stepped memnet network, with one queue group
// and an injected clock: base + ticks·tickDur + advance + the node's skew.
type cluster struct {
	t       testing.TB
	net     *memnet.Network
	ids     []multiraft.NodeID
	nodes   map[multiraft.NodeID]*tnode
	cfg     multiraft.Config
	qcfg    queue.Config
	base    time.Time
	ticks   uint64
	advance time.Duration
	leaders map[uint64]multiraft.NodeID // term -> leader seen
}

func newCluster(t testing.TB, seed int64, n int, qcfg queue.Config) *cluster {
	c := &cluster{t: t, net: memnet.New(seed), nodes: map[multiraft.NodeID]*tnode{},
		cfg:  multiraft.Config{ElectionTicks: 10, HeartbeatTicks: 1, SnapshotEntries: 25},
		qcfg: qcfg, base: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC),
		leaders: map[uint64]multiraft.NodeID{}}
	for i := 1; i <= n; i++ {
		c.ids = append(c.ids, multiraft.NodeID(i))
	}
	for _, id := range c.ids {
		c.nodes[id] = &tnode{id: id, eng: multiraft.NewMemEngine()}
		c.start(id)
	}
	return c
}

func (c *cluster) clock(nd *tnode) func() time.Time {
	return func() time.Time {
		return c.base.Add(time.Duration(c.ticks)*tickDur + c.advance + nd.skew)
	}
}

func (c *cluster) start(id multiraft.NodeID) {
	nd := c.nodes[id]
	cfg := c.cfg
	cfg.Node, cfg.Engine, cfg.Transport, cfg.Peers = id, nd.eng, c.net.Transport(id), c.ids
	h, err := multiraft.New(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	sm, err := NewMachine(id, c.qcfg)
	if err != nil {
		c.t.Fatal(err)
	}
	var voters []multiraft.NodeID
	if !nd.made {
		voters = c.ids
	}
	if err := h.CreateGroup(testGroup, voters, sm); err != nil {
		c.t.Fatalf("n%d: create group: %v", id, err)
	}
	nd.host, nd.sm, nd.q, nd.up, nd.made = h, sm, NewQueue(h, testGroup, sm, c.clock(nd)), true, true
	c.net.Attach(id, h)
}

// waitEncoded waits (bounded) until no host encodes a snapshot: the encoding runs on a
// goroutine of its own (multiraft.SnapshotCapturer), and the schedule must not depend on
// how fast it ran.
func (c *cluster) waitEncoded() {
	for _, nd := range c.up() {
		for i := 0; nd.host.BackgroundWork() > 0; i++ {
			if i == 20000 {
				c.t.Fatalf("n%d: a snapshot encoding did not end in 2 s", nd.id)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
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
	c.ticks++
	for _, nd := range c.up() {
		nd.host.Tick()
	}
	c.net.Advance()
	c.settle()
}

func (c *cluster) settle() {
	for range 100 {
		moved := c.net.Deliver() > 0
		c.waitEncoded()
		for _, nd := range c.up() {
			worked, err := nd.host.ProcessReady()
			if err != nil {
				c.t.Fatalf("n%d: %v", nd.id, err)
			}
			moved = moved || worked
		}
		c.checkLeaders()
		if !moved {
			return
		}
	}
}

func (c *cluster) checkLeaders() {
	for _, nd := range c.up() {
		st, err := nd.host.Status(testGroup)
		if err != nil || st.Role != raft.StateLeader {
			continue
		}
		if prev, ok := c.leaders[st.Term]; ok && prev != nd.id {
			c.t.Fatalf("term %d: two leaders, n%d and n%d", st.Term, prev, nd.id)
		}
		c.leaders[st.Term] = nd.id
	}
}

// leader is the up node that leads in the highest term, or 0.
func (c *cluster) leader() multiraft.NodeID {
	var best multiraft.NodeID
	var term uint64
	for _, nd := range c.up() {
		st, err := c.nodes[nd.id].host.Status(testGroup)
		if err == nil && st.Role == raft.StateLeader && st.Term >= term {
			best, term = nd.id, st.Term
		}
	}
	return best
}

// elect ticks until a node other than those in not leads (bounded).
func (c *cluster) elect(not ...multiraft.NodeID) multiraft.NodeID {
	for range 500 {
		l := c.leader()
		ok := l != 0
		for _, n := range not {
			ok = ok && l != n
		}
		if ok {
			return l
		}
		c.tick()
	}
	c.t.Fatalf("no leader after 500 ticks (excluding %v)", not)
	return 0
}

// await ticks until the call is answered or within ticks pass.
func (c *cluster) await(cl *call, within int) bool {
	for i := 0; ; i++ {
		select {
		case <-cl.p.Done():
			return true
		default:
		}
		if i == within {
			return false
		}
		c.tick()
	}
}

// exec runs one command as a client that follows NOT_LEADER hints would: it starts at
// node at (0: the leader), retries where the hint points, and gives up after a bounded
// number of ticks with ErrOutcomeUnknown if a proposal never answers.
func (c *cluster) exec(at multiraft.NodeID, cmd Command) (Result, error) {
	if at == 0 {
		at = c.elect()
	}
	for try := 0; try < 20; try++ {
		nd := c.nodes[at]
		if !nd.up {
			return Result{}, ErrOutcomeUnknown
		}
		cl, err := nd.q.start(cmd)
		var nl *NotLeaderError
		if errors.As(err, &nl) {
			if nl.Leader == 0 || !c.nodes[nl.Leader].up {
				c.tick()
				continue
			}
			at = nl.Leader
			continue
		}
		if err != nil {
			return Result{}, err
		}
		if !c.await(cl, 200) {
			return Result{}, ErrOutcomeUnknown
		}
		return nd.q.finish(cl)
	}
	return Result{}, errors.New("no leader reached in 20 tries")
}
