package tcptransport_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/faultproxy"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/tcptransport"
	"go.etcd.io/raft/v3"

	"github.com/sluice-mq/sluice/internal/testlog"
)

// logSM is a state machine that keeps every applied entry's data in order.
type logSM struct {
	mu   sync.Mutex
	data []string
}

func (s *logSM) Apply(ents []multiraft.Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range ents {
		s.data = append(s.data, string(e.Data))
	}
	return nil
}

func (s *logSM) Snapshot() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return json.Marshal(s.data)
}

func (s *logSM) Restore(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data = nil
	if b == nil {
		return nil
	}
	return json.Unmarshal(b, &s.data)
}

func (s *logSM) applied() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.data)
}

// opts shape a test cluster.
type opts struct {
	nodes, groups int
	proxies       bool // a faultproxy on every directed link
	tick          time.Duration
	serverTLS     func(multiraft.NodeID) *tls.Config
	clientTLS     func(multiraft.NodeID) *tls.Config
	verifyPeer    func(multiraft.NodeID, tls.ConnectionState) error
}

// node is one member of a test cluster.
type node struct {
	id   multiraft.NodeID
	addr string
	eng  *multiraft.MemEngine
	host *multiraft.Host
	tr   *tcptransport.Transport
	sms  map[multiraft.GroupID]*logSM
	stop func()
}

// cluster is multiraft hosts over real loopback TCP, each on its own Run goroutine with a
// real ticker: the production wiring, with an in-memory engine.
type cluster struct {
	t       testing.TB
	o       opts
	ids     []multiraft.NodeID
	nodes   map[multiraft.NodeID]*node
	proxies map[[2]multiraft.NodeID]*faultproxy.Proxy // [from, to]
	logs    *testlog.Buffer
	log     *slog.Logger
}

func newCluster(t testing.TB, o opts) *cluster {
	if o.tick == 0 {
		o.tick = 10 * time.Millisecond
	}
	c := &cluster{t: t, o: o, nodes: map[multiraft.NodeID]*node{},
		proxies: map[[2]multiraft.NodeID]*faultproxy.Proxy{}, logs: &testlog.Buffer{}}
	// Debug: a refusal past the first of a window is a debug line (refuseLogEvery), and the
	// refusal tests look for each one's reason.
	c.log = slog.New(slog.NewTextHandler(c.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("transport log:\n%s", c.logs)
		}
	})
	lns := map[multiraft.NodeID]net.Listener{}
	for i := 1; i <= o.nodes; i++ {
		id := multiraft.NodeID(i)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c.ids = append(c.ids, id)
		lns[id] = ln
		c.nodes[id] = &node{id: id, addr: ln.Addr().String(), eng: multiraft.NewMemEngine()}
	}
	if o.proxies {
		for _, from := range c.ids {
			for _, to := range c.ids {
				if from == to {
					continue
				}
				p, err := faultproxy.New(c.nodes[to].addr)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = p.Close() })
				c.proxies[[2]multiraft.NodeID{from, to}] = p
			}
		}
	}
	for _, id := range c.ids {
		c.start(id, lns[id])
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			if n.stop != nil {
				n.stop()
			}
		}
	})
	return c
}

func (c *cluster) peerAddrs(from multiraft.NodeID) map[multiraft.NodeID]string {
	m := map[multiraft.NodeID]string{}
	for _, to := range c.ids {
		if to == from {
			continue
		}
		if p := c.proxies[[2]multiraft.NodeID{from, to}]; p != nil {
			m[to] = p.Addr()
		} else {
			m[to] = c.nodes[to].addr
		}
	}
	return m
}

// start runs node id (again, after stop: its engine keeps what it synced) on ln.
func (c *cluster) start(id multiraft.NodeID, ln net.Listener) {
	n := c.nodes[id]
	cfg := tcptransport.Config{Node: id, ClusterID: "test", Peers: c.peerAddrs(id),
		Logger: c.log, BackoffMin: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond}
	if c.o.serverTLS != nil {
		cfg.ServerTLS, cfg.ClientTLS = c.o.serverTLS(id), c.o.clientTLS(id)
		cfg.VerifyPeer = c.o.verifyPeer
	}
	tr, err := tcptransport.New(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	h, err := multiraft.New(multiraft.Config{Node: id, Peers: c.ids, Engine: n.eng, Transport: tr})
	if err != nil {
		c.t.Fatal(err)
	}
	n.host, n.tr, n.sms = h, tr, map[multiraft.GroupID]*logSM{}
	for g := 1; g <= c.o.groups; g++ {
		sm := &logSM{}
		if err := h.CreateGroup(multiraft.GroupID(g), c.ids, sm); err != nil {
			c.t.Fatal(err)
		}
		n.sms[multiraft.GroupID(g)] = sm
	}
	tr.Serve(ln, h)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	ticker := multiraft.NewTimeTicker(c.o.tick)
	go func() {
		defer close(done)
		defer ticker.Stop()
		_ = h.Run(ctx, ticker)
	}()
	n.stop = func() {
		cancel()
		<-done
		h.Close()
		_ = tr.Close()
		n.stop = nil
	}
}

// restart stops node id (unless it is stopped) and starts it again on the same address
// with the same engine.
func (c *cluster) restart(id multiraft.NodeID) {
	n := c.nodes[id]
	if n.stop != nil {
		n.stop()
	}
	var ln net.Listener
	var err error
	for range 100 { // the port was just freed; it is ours again within moments
		if ln, err = net.Listen("tcp", n.addr); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		c.t.Fatal(err)
	}
	c.start(id, ln)
}

// isolate puts every link to and from id in mode m (Pass heals).
func (c *cluster) isolate(id multiraft.NodeID, m faultproxy.Mode) {
	for k, p := range c.proxies {
		if k[0] == id || k[1] == id {
			p.Set(m)
		}
	}
}

// isolateInbound puts only the links into id in mode m: id still reaches the others.
func (c *cluster) isolateInbound(id multiraft.NodeID, m faultproxy.Mode) {
	for k, p := range c.proxies {
		if k[1] == id {
			p.Set(m)
		}
	}
}

func (c *cluster) groupIDs() []multiraft.GroupID {
	var gs []multiraft.GroupID
	for g := 1; g <= c.o.groups; g++ {
		gs = append(gs, multiraft.GroupID(g))
	}
	return gs
}

// leaders waits until every group has a leader among the given nodes that knows itself
// leader, and returns them.
func (c *cluster) leaders(among []multiraft.NodeID, timeout time.Duration) map[multiraft.GroupID]multiraft.NodeID {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := map[multiraft.GroupID]multiraft.NodeID{}
		for _, g := range c.groupIDs() {
			for _, id := range among {
				if st, err := c.nodes[id].host.Status(g); err == nil && st.Leader == id && st.Role == raft.StateLeader {
					got[g] = id
				}
			}
		}
		if len(got) == c.o.groups {
			return got
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("after %v, %d of %d groups have a leader among %v: %v", timeout, len(got), c.o.groups, among, got)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// propose commits data to group g through whichever of the given nodes leads it,
// retrying while leadership settles.
func (c *cluster) propose(g multiraft.GroupID, data string, among []multiraft.NodeID, timeout time.Duration) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	for ctx.Err() == nil {
		for _, id := range among {
			pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
			_, err := c.nodes[id].host.Propose(pctx, g, []byte(data))
			pcancel()
			if err == nil {
				return
			}
			last = err
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.t.Fatalf("group %d: %q not committed through %v in %v: %v", g, data, among, timeout, last)
}

// converged waits until every node applied the same entries, in the same order, in every
// group, and returns them.
func (c *cluster) converged(timeout time.Duration) map[multiraft.GroupID][]string {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out, diff := map[multiraft.GroupID][]string{}, ""
		for _, g := range c.groupIDs() {
			want := c.nodes[c.ids[0]].sms[g].applied()
			for _, id := range c.ids[1:] {
				if got := c.nodes[id].sms[g].applied(); !slices.Equal(got, want) {
					diff = fmt.Sprintf("group %d: n%d applied %q, n%d %q", g, c.ids[0], want, id, got)
				}
			}
			out[g] = want
		}
		if diff == "" {
			return out
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("not converged after %v: %s", timeout, diff)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func isNotLeader(err error) bool {
	var nl *multiraft.NotLeaderError
	return errors.As(err, &nl)
}
