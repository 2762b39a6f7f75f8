package tcptransport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// peer is the outbound side of one node pair: a queue that Send fills and one writer
// goroutine (run) that owns the connection, dials it when there is something to send,
// and writes everything queued since its last write in one go.
type peer struct {
	t      *Transport
	id     multiraft.NodeID
	addr   string
	ctx    context.Context // ends with the transport, or when the peer is removed or moved
	cancel context.CancelFunc
	wake   chan struct{} // the queue went from empty to not empty

	mu     sync.Mutex // guards queue, queued and live
	queue  []multiraft.Batch
	queued int        // estimated bytes in queue
	live   net.Conn   // raw, from the dial on: what stop closes to cut a write or handshake short
	idle   []*reqConn // kept request streams (requests.go)

	// Owned by run.
	conn      net.Conn      // what frames are written to (TLS, or raw)
	raw       net.Conn      // the TCP connection under it, which is what gets closed
	dead      chan struct{} // closed when conn's reader saw it end
	failures  int           // failed connection attempts in a row
	connected bool          // a connection was ever established (the next one is a reconnect)
	warned    bool          // the current run of failures was logged
}

func (p *peer) enqueue(b multiraft.Batch) {
	size := 16
	for i := range b.Messages {
		size += b.Messages[i].Msg.Size() + 12
	}
	p.mu.Lock()
	// The byte bound spares an empty queue, so one batch larger than QueueBytes (a big
	// snapshot) still goes; MaxFrame is what bounds a single message.
	if len(p.queue) >= p.t.cfg.QueueBatches || (len(p.queue) > 0 && p.queued+size > p.t.cfg.QueueBytes) {
		p.mu.Unlock()
		p.t.stats.dropped.Add(1)
		return
	}
	p.queue = append(p.queue, b)
	p.queued += size
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *peer) take() []multiraft.Batch {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.queue
	p.queue, p.queued = nil, 0
	return q
}

func (p *peer) run() {
	defer p.t.wg.Done()
	defer p.closeConn()
	var buf []byte
	for {
		select {
		case <-p.wake:
		case <-p.ctx.Done():
			return
		}
		for batches := p.take(); len(batches) > 0; batches = p.take() {
			if p.ctx.Err() != nil {
				return
			}
			buf = p.write(buf[:0], batches)
			if cap(buf) > 4<<20 {
				buf = nil // a big write (a snapshot) does not pin its buffer
			}
		}
	}
}

// write sends batches in one write, connecting first if need be; on failure they are lost.
func (p *peer) write(buf []byte, batches []multiraft.Batch) []byte {
	if p.conn != nil {
		select {
		case <-p.dead: // the peer closed it: reconnect rather than write into a dead socket
			p.closeConn()
		default:
		}
	}
	if p.conn == nil && !p.connect() {
		p.t.stats.dropped.Add(uint64(len(batches)))
		return buf
	}
	// Every batch taken goes in one write, and their messages in as few frames as the
	// frame limit allows: the receiver takes each frame as one Batch, so many batches
	// cost it one Host.Receive (one lock, one wake-up) instead of one each.
	msgs := batches[0].Messages
	if len(batches) > 1 {
		n := 0
		for _, b := range batches {
			n += len(b.Messages)
		}
		msgs = make([]multiraft.Message, 0, n)
		for _, b := range batches {
			msgs = append(msgs, b.Messages...)
		}
	}
	buf, frames, dropped := appendFrames(buf, msgs, p.t.cfg.MaxFrame)
	if dropped > 0 {
		p.t.stats.droppedMessages.Add(uint64(dropped))
		p.t.log.Warn("cluster transport: dropped messages larger than the frame limit",
			"peer", uint64(p.id), "messages", dropped, "max_frame", p.t.cfg.MaxFrame)
	}
	if err := p.writeAll(buf); err != nil {
		p.t.stats.dropped.Add(uint64(len(batches)))
		if p.ctx.Err() == nil {
			p.t.log.Warn("cluster transport: write to peer failed; reconnecting",
				"peer", uint64(p.id), "addr", p.addr, "err", err)
		}
		p.closeConn()
		return buf
	}
	s := &p.t.stats
	s.writes.Add(1)
	s.batchesSent.Add(uint64(len(batches)))
	s.messagesSent.Add(uint64(len(msgs) - dropped))
	s.framesSent.Add(uint64(frames))
	s.bytesSent.Add(uint64(len(buf)))
	return buf
}

// writeChunk is how much of a write must go through within one WriteTimeout: the deadline
// measures progress, not the whole write, so a large coalesced write (up to QueueBytes) to a
// slow but reading peer is not cut, while a peer that stops reading is cut within one
// WriteTimeout. Small writes, the usual case, are still one write call.
const writeChunk = 64 << 10

func (p *peer) writeAll(buf []byte) error {
	for len(buf) > 0 {
		n := min(len(buf), writeChunk)
		_ = p.conn.SetWriteDeadline(time.Now().Add(p.t.cfg.WriteTimeout))
		if _, err := p.conn.Write(buf[:n]); err != nil {
			return err
		}
		buf = buf[n:]
	}
	return nil
}

// connect dials the peer (after the backoff its failures so far call for) and shakes hands.
func (p *peer) connect() bool {
	if p.failures > 0 && !p.sleep(p.backoff()) {
		return false
	}
	p.t.stats.dials.Add(1)
	conn, raw, err := p.dial()
	if err != nil {
		p.failures++
		p.t.stats.dialFailures.Add(1)
		if p.ctx.Err() == nil && !p.warned {
			p.warned = true // once per outage, not once per attempt
			p.t.log.Warn("cluster transport: cannot reach peer; retrying with backoff",
				"peer", uint64(p.id), "addr", p.addr, "err", err)
		}
		return false
	}
	if p.connected {
		p.t.stats.reconnects.Add(1)
	}
	if p.warned || !p.connected {
		p.t.log.Info("cluster transport: connected to peer", "peer", uint64(p.id), "addr", p.addr)
	}
	p.conn, p.raw, p.dead = conn, raw, make(chan struct{})
	p.failures, p.connected, p.warned = 0, true, false
	p.t.wg.Add(1)
	go func(dead chan struct{}) {
		defer p.t.wg.Done()
		if err := watch(conn, raw, dead); p.ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
			p.t.log.Info("cluster transport: connection to peer ended", "peer", uint64(p.id), "addr", p.addr, "err", err)
		}
	}(p.dead)
	return true
}

// dial returns the connection to write to and the TCP connection under it. Connections
// are closed through the latter: closing a TLS connection would first try to send a
// close_notify alert, which can wait out a deadline on a peer that stopped reading.
func (p *peer) dial() (conn, raw net.Conn, err error) {
	t := p.t
	ctx, cancel := context.WithTimeout(p.ctx, t.cfg.DialTimeout+t.cfg.HandshakeTimeout)
	defer cancel()
	d := net.Dialer{Timeout: t.cfg.DialTimeout, KeepAlive: 15 * time.Second,
		Control: func(_, _ string, c syscall.RawConn) error { return limitUnacked(c, t.cfg.UnackedTimeout) }}
	raw, err = d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, nil, err
	}
	if !t.track(raw) || !p.setLive(raw) { // from now on Close (or stop) cuts a handshake short
		t.untrack(raw)
		return nil, nil, net.ErrClosed
	}
	conn = raw
	if t.cfg.ClientTLS != nil {
		cfg := t.cfg.ClientTLS
		if cfg.ServerName == "" {
			cfg = cfg.Clone()
			cfg.ServerName, _, _ = net.SplitHostPort(p.addr)
		}
		tc := tls.Client(raw, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			p.dropLive(raw)
			return nil, nil, fmt.Errorf("tls: %w", err)
		}
		conn = tc
		if t.cfg.VerifyPeer != nil {
			if err := t.cfg.VerifyPeer(p.id, tc.ConnectionState()); err != nil {
				p.dropLive(raw)
				return nil, nil, fmt.Errorf("peer's certificate refused: %w", err)
			}
		}
	}
	if err := t.handshake(conn, p.id, 0); err != nil {
		p.dropLive(raw)
		return nil, nil, err
	}
	return conn, raw, nil
}

// errRefused is a peer's refusal at the handshake.
var errRefused = errors.New("refused by peer")

// handshake sends the dialler's hello to node to (code: 0 for the raft stream,
// codeRequests for a request stream) and checks the answer.
func (t *Transport) handshake(conn net.Conn, to multiraft.NodeID, code Code) error {
	_ = conn.SetDeadline(time.Now().Add(t.cfg.HandshakeTimeout))
	defer func() { _ = conn.SetDeadline(time.Time{}) }()
	if _, err := conn.Write(appendHello(nil, hello{Version: version, Code: code, Cluster: t.cfg.ClusterID,
		From: t.cfg.Node, To: to})); err != nil {
		return fmt.Errorf("send handshake: %w", err)
	}
	h, err := readHello(conn)
	if err != nil {
		return err
	}
	switch {
	case h.Code != Accepted:
		return fmt.Errorf("%w: %v (it is node %d of cluster %q, protocol version %d)",
			errRefused, h.Code, h.From, h.Cluster, h.Version)
	case h.Cluster != t.cfg.ClusterID || h.From != to || h.To != t.cfg.Node || h.Version != version:
		return fmt.Errorf("%w: it answered as node %d of cluster %q (protocol version %d)",
			errRefused, h.From, h.Cluster, h.Version)
	}
	return nil
}

// watch reads the outbound connection, on which the peer never sends anything after its
// hello: it returns, and closes dead, when the peer closes or resets the connection, so the
// writer reconnects before its next write instead of losing that write.
func watch(conn, raw net.Conn, dead chan struct{}) error {
	var b [1]byte
	_, err := conn.Read(b[:]) // data, EOF or error: the connection is over either way
	_ = raw.Close()
	close(dead)
	if err == nil {
		err = errors.New("the peer sent data after its handshake")
	}
	return err
}

func (p *peer) closeConn() {
	if p.raw != nil {
		p.t.untrack(p.raw)
		p.conn, p.raw = nil, nil
	}
	p.setLive(nil)
}

// backoff is BackoffMin × 2^(failures-1) capped at BackoffMax, jittered to [½, 1] of it, so
// nodes that lost a peer together do not redial it in step.
func (p *peer) backoff() time.Duration {
	d := p.t.cfg.BackoffMin
	for i := 1; i < p.failures && d < p.t.cfg.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, p.t.cfg.BackoffMax)
	return d/2 + rand.N(d/2+1)
}

func (p *peer) sleep(d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-p.ctx.Done():
		return false
	}
}

// setLive records c (nil: none) as the peer's connection for stop to close; it reports
// false once the peer is stopped.
func (p *peer) setLive(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx.Err() != nil && c != nil {
		return false
	}
	p.live = c
	return true
}

func (p *peer) dropLive(raw net.Conn) {
	p.setLive(nil)
	p.t.untrack(raw)
}

// stop ends the peer's writer: queued batches are lost, and a dial, handshake or write in
// flight is cut short by closing its connection.
func (p *peer) stop() {
	p.mu.Lock()
	p.cancel()
	if p.live != nil {
		_ = p.live.Close()
	}
	dropped := len(p.queue)
	p.queue, p.queued = nil, 0
	p.mu.Unlock()
	p.t.stats.dropped.Add(uint64(dropped))
	p.closeIdle()
}
