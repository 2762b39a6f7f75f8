package tcptransport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/lograte"
)

// Receiver is what arriving batches are handed to: a multiraft.Host.
type Receiver interface {
	Receive(multiraft.Batch)
}

// Config is a transport's configuration. Zero values take the defaults in parentheses.
type Config struct {
	Node      multiraft.NodeID // this node; never 0
	ClusterID string           // every node of the cluster has the same; 1..64 bytes
	// Peers maps every other node to the address it is dialled at. They are also the only
	// nodes whose connections are accepted. SetPeer and RemovePeer change them later.
	Peers map[multiraft.NodeID]string
	// ServerTLS, when set, wraps every accepted connection in TLS; ClientTLS every dialled
	// one. Mutual TLS between nodes is both, with ClientAuth RequireAndVerifyClientCert and
	// each node's certificate and the cluster CA. A ClientTLS with no ServerName verifies
	// the peer's certificate against the host part of its address.
	ServerTLS, ClientTLS *tls.Config
	// VerifyPeer, when set, is asked about every TLS connection once the handshake named
	// the node at the other end (the dialler's claim on the listening side, the node
	// dialled on the other): an error refuses it. It is where a node's certificate is
	// bound to its node id (say, CN node-N), so a node of the cluster cannot speak as
	// another; without it any certificate the CA signed may claim any peer id.
	VerifyPeer func(id multiraft.NodeID, cs tls.ConnectionState) error
	// Streams, when set, takes the byte streams peers open (streams.go); without it they
	// are refused.
	Streams StreamHandler
	Logger  *slog.Logger // (slog.Default() with the node's id; a given one is expected to name the node)

	QueueBatches int // batches waiting per peer before Send drops (1024)
	QueueBytes   int // their estimated size, likewise (64 MiB)
	MaxFrame     int // a frame's largest payload, both ways (64 MiB); larger messages are dropped

	DialTimeout      time.Duration // one connection attempt (2s)
	HandshakeTimeout time.Duration // TLS and hello, each way (5s)
	WriteTimeout     time.Duration // each 64 KiB of a write: a peer that stops reading is cut after it (5s)
	// UnackedTimeout is how long data sent to a peer may stay unacknowledged, or its
	// window shut, before the kernel gives up on the connection (30s; TCP_USER_TIMEOUT, Linux
	// only). Without it a peer that vanished without a reset is noticed after TCP's
	// retransmission minutes. It must leave a slow but live peer time to drain the socket
	// buffers, so it is much longer than WriteTimeout.
	UnackedTimeout time.Duration
	// IdleTimeout closes an inbound connection that carried nothing for this long (10s). It
	// must be longer than the host's liveness beat (LivenessTicks × the tick), which every
	// live peer sends whatever its groups do.
	IdleTimeout time.Duration
	// Reconnect backoff: after n failures in a row, wait about BackoffMin × 2^n, capped at
	// BackoffMax, jittered to between half and all of it (50ms, 1s).
	BackoffMin, BackoffMax time.Duration
}

func (c *Config) defaults() {
	defInt := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	defInt(&c.QueueBatches, 1024)
	defInt(&c.QueueBytes, 64<<20)
	defInt(&c.MaxFrame, 64<<20)
	defDur(&c.DialTimeout, 2*time.Second)
	defDur(&c.HandshakeTimeout, 5*time.Second)
	defDur(&c.WriteTimeout, 5*time.Second)
	defDur(&c.IdleTimeout, 10*time.Second)
	defDur(&c.UnackedTimeout, 30*time.Second)
	defDur(&c.BackoffMin, 50*time.Millisecond)
	defDur(&c.BackoffMax, time.Second)
	if c.BackoffMax < c.BackoffMin {
		c.BackoffMax = c.BackoffMin
	}
	if c.Logger == nil {
		c.Logger = slog.Default().With("node", uint64(c.Node))
	}
}

// Transport is the TCP transport of one node.
type Transport struct {
	cfg  Config
	log  *slog.Logger
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
	// peers is replaced, never changed, under mu (SetPeer, RemovePeer), so Send reads it
	// without a lock.
	peers atomic.Pointer[map[multiraft.NodeID]*peer]
	stats counters
	// refusals limits the refused handshakes' warnings (inbound.go).
	refusals lograte.Limiter

	mu      sync.Mutex // guards everything below
	closed  bool
	lns     []net.Listener
	inbound map[multiraft.NodeID]net.Conn // the live accepted connection of each peer
	conns   map[net.Conn]struct{}         // every accepted connection, to close them on Close
}

// New returns a transport that sends to cfg.Peers; Serve starts accepting.
func New(cfg Config) (*Transport, error) {
	if cfg.Node == 0 {
		return nil, errors.New("tcptransport: Config.Node must not be 0")
	}
	if n := len(cfg.ClusterID); n == 0 || n > MaxClusterID {
		return nil, fmt.Errorf("tcptransport: ClusterID must be 1..%d bytes, not %d", MaxClusterID, n)
	}
	cfg.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	t := &Transport{cfg: cfg, log: cfg.Logger, ctx: ctx, stop: cancel, refusals: lograte.Limiter{Every: refuseLogEvery},
		inbound: map[multiraft.NodeID]net.Conn{}, conns: map[net.Conn]struct{}{}}
	peers := map[multiraft.NodeID]*peer{}
	for id, addr := range cfg.Peers {
		if id == 0 || id == cfg.Node {
			cancel()
			return nil, fmt.Errorf("tcptransport: peer id %d is 0 or this node", id)
		}
		peers[id] = t.startPeer(id, addr)
	}
	t.peers.Store(&peers)
	return t, nil
}

func (t *Transport) startPeer(id multiraft.NodeID, addr string) *peer {
	ctx, cancel := context.WithCancel(t.ctx)
	p := &peer{t: t, id: id, addr: addr, ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1)}
	t.wg.Add(1)
	go p.run()
	return p
}

func (t *Transport) peer(id multiraft.NodeID) *peer { return (*t.peers.Load())[id] }

// SetPeer makes node id a peer at addr (a node added to the cluster), or moves it there
// (its connection to the old address is closed, and batches queued for it are lost). From
// then on batches to it are sent and its connections accepted.
func (t *Transport) SetPeer(id multiraft.NodeID, addr string) error {
	if id == 0 || id == t.cfg.Node {
		return fmt.Errorf("tcptransport: peer id %d is 0 or this node", id)
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return net.ErrClosed
	}
	old := *t.peers.Load()
	moved := old[id]
	if moved != nil && moved.addr == addr {
		t.mu.Unlock()
		return nil
	}
	peers := maps.Clone(old)
	peers[id] = t.startPeer(id, addr)
	t.peers.Store(&peers)
	t.mu.Unlock()
	if moved != nil {
		moved.stop() // outside t.mu: it untracks its kept request connections, which takes t.mu
	}
	return nil
}

// PeerAt returns the peer dialled at addr, if any (the address as given, not resolved).
func (t *Transport) PeerAt(addr string) (multiraft.NodeID, bool) {
	for id, p := range *t.peers.Load() {
		if p.addr == addr {
			return id, true
		}
	}
	return 0, false
}

// RemovePeer stops treating node id as a peer (a node removed from the cluster): batches
// to it are dropped, its connections closed, and new ones from it refused.
func (t *Transport) RemovePeer(id multiraft.NodeID) {
	t.mu.Lock()
	old := *t.peers.Load()
	p := old[id]
	if p == nil {
		t.mu.Unlock()
		return
	}
	peers := maps.Clone(old)
	delete(peers, id)
	t.peers.Store(&peers)
	if c := t.inbound[id]; c != nil {
		_ = c.Close()
	}
	t.mu.Unlock()
	// Outside t.mu: stop untracks the peer's kept request connections, which takes t.mu
	// (under it, the first RemovePeer of a peer asked something deadlocked the caller, the
	// broker's reconcile loop, for good).
	p.stop()
}

// Send queues b for its destination and returns at once; it drops b (and counts it) if
// the destination is not a peer or its queue is full. It never blocks on the network.
func (t *Transport) Send(b multiraft.Batch) {
	p := t.peer(b.To)
	if p == nil || b.From != t.cfg.Node {
		t.stats.dropped.Add(1)
		return
	}
	p.enqueue(b)
}

// Serve accepts peers' connections on ln and hands what they send to r, from one
// goroutine per connection, until Close (which closes ln). It returns at once.
func (t *Transport) Serve(ln net.Listener, r Receiver) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		_ = ln.Close()
		return
	}
	t.lns = append(t.lns, ln)
	t.wg.Add(1)
	go t.accept(ln, r)
}

// Stats returns the transport's counters.
func (t *Transport) Stats() Stats { return t.stats.snapshot() }

// Close stops the transport: listeners and connections are closed, queued batches are
// lost, and every goroutine it started has returned when Close does.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.stop()
	for _, ln := range t.lns {
		_ = ln.Close()
	}
	for c := range t.conns {
		_ = c.Close()
	}
	t.mu.Unlock()
	t.wg.Wait()
	return nil
}
