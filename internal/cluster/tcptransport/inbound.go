package tcptransport

import (
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

func (t *Transport) accept(ln net.Listener, r Receiver) {
	defer t.wg.Done()
	delay := 5 * time.Millisecond
	for {
		c, err := ln.Accept()
		if err != nil {
			if t.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: wait a little and try again, as
			// net/http does, rather than spin or give up on the listener.
			t.log.Warn("cluster transport: accept failed", "err", err)
			if !sleepCtx(t, delay) {
				return
			}
			delay = min(2*delay, time.Second)
			continue
		}
		delay = 5 * time.Millisecond
		if !t.track(c) {
			return
		}
		t.wg.Add(1)
		go t.serveConn(c, r)
	}
}

// serveConn shakes hands with a dialler, then reads its frames until the connection ends.
func (t *Transport) serveConn(c net.Conn, r Receiver) {
	defer t.wg.Done()
	defer t.untrack(c)
	remote := c.RemoteAddr().String()
	from, conn, code, ok := t.admit(c, remote)
	if !ok {
		return
	}
	log := t.log.With("peer", uint64(from), "remote", remote)
	if code == codeRequests {
		t.serveRequests(conn, from, r, log)
		return
	}
	if isStream(code) {
		t.serveStream(conn, c, code, from)
		return
	}
	defer t.forget(from, c)
	var buf []byte
	for {
		_ = c.SetReadDeadline(time.Now().Add(t.cfg.IdleTimeout))
		var err error
		buf, err = readFrame(conn, buf, t.cfg.MaxFrame)
		if err == nil {
			var msgs []multiraft.Message
			if msgs, err = decodePayload(buf); err == nil {
				t.stats.batchesReceived.Add(1)
				t.stats.messagesReceived.Add(uint64(len(msgs)))
				t.stats.bytesReceived.Add(uint64(frameHeader + len(buf)))
				r.Receive(multiraft.Batch{From: from, To: t.cfg.Node, Messages: msgs})
				if cap(buf) > 4<<20 {
					buf = nil
				}
				continue
			}
		}
		t.connEnded(log, err)
		return
	}
}

// connEnded logs why an inbound connection ended, loudly for what a healthy peer never does.
func (t *Transport) connEnded(log *slog.Logger, err error) {
	var fe *FrameError
	var ne net.Error
	switch {
	case t.ctx.Err() != nil:
	case errors.As(err, &fe) && fe.torn:
		// The peer's side went away mid-frame (it crashed, or cut a write that missed its
		// deadline): a lost connection, not a bad peer.
		log.Info("cluster transport: connection from peer ended mid-frame", "err", err)
	case errors.As(err, &fe):
		t.stats.badFrames.Add(1)
		log.Warn("cluster transport: closing connection from peer", "err", err)
	case errors.As(err, &ne) && ne.Timeout():
		log.Info("cluster transport: closing connection from peer idle for the idle timeout", "idle_timeout", t.cfg.IdleTimeout)
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		log.Info("cluster transport: peer closed its connection")
	default:
		log.Info("cluster transport: connection from peer ended", "err", err)
	}
}

// admit runs TLS (if configured) and the handshake on an accepted connection raw; it
// answers the dialler and reports whether the connection carries a peer's frames from now
// on, and returns what to read them from. The peer's live connection is kept as raw, which
// is what is closed (see peer.dial).
func (t *Transport) admit(raw net.Conn, remote string) (multiraft.NodeID, net.Conn, Code, bool) {
	c := raw
	_ = c.SetDeadline(time.Now().Add(t.cfg.HandshakeTimeout))
	if t.cfg.ServerTLS != nil {
		tc := tls.Server(c, t.cfg.ServerTLS)
		if err := tc.HandshakeContext(t.ctx); err != nil {
			t.refuse("TLS handshake failed", remote, "err", err)
			return 0, nil, 0, false
		}
		c = tc
	}
	h, err := readHello(c)
	if err != nil {
		t.refuse("not a sluice peer", remote, "err", err)
		return 0, nil, 0, false
	}
	code := t.judge(h)
	if tc, ok := c.(*tls.Conn); ok && code == Accepted && t.cfg.VerifyPeer != nil {
		if err := t.cfg.VerifyPeer(h.From, tc.ConnectionState()); err != nil {
			code = NotAuthorized
			// counted once, with the refused handshake below
			t.logRefusal("peer's certificate refused", remote, "claims_node", uint64(h.From), "err", err)
		}
	}
	answer := appendHello(nil, hello{Version: version, Code: code, Cluster: t.cfg.ClusterID, From: t.cfg.Node, To: h.From})
	if _, err := c.Write(answer); err != nil {
		t.refuse("could not answer the handshake", remote, "err", err)
		return 0, nil, 0, false
	}
	if code != Accepted {
		t.refuse("refused peer: "+code.String(), remote, "claims_node", uint64(h.From),
			"claims_to_reach", uint64(h.To), "cluster", h.Cluster, "our_cluster", t.cfg.ClusterID,
			"version", h.Version)
		return 0, nil, 0, false
	}
	_ = c.SetDeadline(time.Time{})
	if h.Code == codeRequests || isStream(h.Code) {
		return h.From, c, h.Code, true // not the peer's raft stream
	}
	t.mu.Lock()
	if t.peer(h.From) == nil { // removed since judged: RemovePeer holds mu to close inbound
		t.mu.Unlock()
		return 0, nil, 0, false
	}
	old := t.inbound[h.From]
	t.inbound[h.From] = raw
	t.mu.Unlock()
	if old != nil {
		// The peer dialled again (it restarted, or lost the old connection before we
		// noticed): the new connection is the live one.
		_ = old.Close()
	}
	return h.From, c, h.Code, true
}

func (t *Transport) judge(h hello) Code {
	switch {
	case h.Version != version, h.Code != 0 && h.Code != codeRequests && !isStream(h.Code):
		return VersionMismatch
	case h.Cluster != t.cfg.ClusterID:
		return WrongCluster
	case h.To != t.cfg.Node:
		return WrongNode
	case t.peer(h.From) == nil:
		return UnknownPeer
	case isStream(h.Code) && t.cfg.Streams == nil:
		return NotServed
	}
	return Accepted
}

func (t *Transport) refuse(msg, remote string, args ...any) {
	t.stats.refused.Add(1)
	t.logRefusal(msg, remote, args...)
}

// logRefusal logs a refusal, as a warning at most once a refuseLogEvery.
func (t *Transport) logRefusal(msg, remote string, args ...any) {
	if t.ctx.Err() != nil {
		return
	}
	args = append([]any{"remote", remote}, args...)
	warn, suppressed := t.refusals.Allow(time.Now())
	if !warn {
		t.log.Debug("cluster transport: "+msg, args...)
		return
	}
	if suppressed > 0 {
		args = append(args, "refusals_not_logged", suppressed)
	}
	t.log.Warn("cluster transport: "+msg, args...)
}

// refuseLogEvery bounds the refusal warnings to one a window: anyone who can reach the
// cluster port can make handshakes fail, and a line each would flood the log (the client
// listeners log theirs at debug for the same reason). The first refusal of a window is a
// warning, saying how many were not logged since the last; the others are debug lines.
// The refusals counter (Stats, sluice_raft_transport_refused_total) counts every one.
const refuseLogEvery = 10 * time.Second

// forget drops c as from's live connection, unless a newer one replaced it.
func (t *Transport) forget(from multiraft.NodeID, c net.Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.inbound[from] == c {
		delete(t.inbound, from)
	}
}

// track registers a connection for Close; it reports false (and closes c) once closing.
func (t *Transport) track(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		_ = c.Close()
		return false
	}
	t.conns[c] = struct{}{}
	return true
}

func (t *Transport) untrack(c net.Conn) {
	_ = c.Close()
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.conns, c)
}

func sleepCtx(t *Transport, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-t.ctx.Done():
		return false
	}
}
