package tcptransport

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// Request streams (multiraft.Requester): a connection the dialler opens with a hello whose
// code is codeRequests instead of 0, authenticated exactly as the raft stream is (TLS,
// VerifyPeer, cluster and node ids), on which the dialler sends one request frame at a time
// and the listener answers each with one response frame:
//
//	request payload:  group id uvarint | request bytes
//	response payload: status u8 (0: ok, 1: error) | answer bytes, or the error's text
//
// A request stream is separate from the raft stream so a large answer (a chunk of records)
// never queues behind or ahead of heartbeats, and the raft stream stays one-way. Idle
// request connections are kept (at most maxIdleRequests per peer) and reused; the
// listener closes one idle for IdleTimeout, and a request that finds its kept connection
// closed is sent again on a new one.

const (
	codeRequests Code = 0x40 // in the dialler's hello only

	statusOK    = 0
	statusError = 1

	maxIdleRequests = 2
	maxErrorText    = 1 << 10
	// defaultRequestTimeout bounds a request whose context has no deadline.
	defaultRequestTimeout = 30 * time.Second
)

var _ multiraft.Requester = (*Transport)(nil)

// errNotServed: the peer's receiver answers no requests.
var errNotServed = errors.New("this node serves no requests")

type reqConn struct{ conn, raw net.Conn }

// Request sends req to group's state machine on node to and waits for the answer, within
// ctx (30s if it has no deadline). An error the peer answered is a *multiraft.RemoteError.
func (t *Transport) Request(ctx context.Context, to multiraft.NodeID, group multiraft.GroupID, req []byte) ([]byte, error) {
	p := t.peer(to)
	if p == nil {
		return nil, fmt.Errorf("tcptransport: node %d is not a peer", to)
	}
	if len(req)+binary.MaxVarintLen64+1 > t.cfg.MaxFrame {
		return nil, fmt.Errorf("tcptransport: request of %d bytes over the frame limit", len(req))
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultRequestTimeout)
		defer cancel()
	}
	for {
		rc, reused := p.takeIdle()
		if rc == nil {
			var err error
			if rc, err = p.dialRequests(ctx); err != nil {
				t.stats.requestFailures.Add(1)
				return nil, err
			}
		}
		resp, err := t.exchange(ctx, rc, to, group, req)
		var re *multiraft.RemoteError
		switch {
		case err == nil, errors.As(err, &re):
			p.putIdle(rc)
			if err != nil {
				t.stats.requestFailures.Add(1)
			}
			return resp, err
		}
		t.untrack(rc.raw)
		if reused && ctx.Err() == nil {
			continue // the kept connection had gone stale: once more on a fresh one
		}
		t.stats.requestFailures.Add(1)
		return nil, fmt.Errorf("tcptransport: request to node %d: %w", to, err)
	}
}

// exchange writes one request frame and reads its response frame on rc.
func (t *Transport) exchange(ctx context.Context, rc *reqConn, to multiraft.NodeID, group multiraft.GroupID, req []byte) ([]byte, error) {
	dl, _ := ctx.Deadline()
	_ = rc.raw.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { _ = rc.raw.SetDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, frameHeader, frameHeader+binary.MaxVarintLen64+len(req))
	buf = binary.AppendUvarint(buf, uint64(group))
	buf = sealFrame(append(buf, req...), 0)
	if _, err := rc.conn.Write(buf); err != nil {
		return nil, err
	}
	t.stats.requestsSent.Add(1)
	resp, err := readFrame(rc.conn, nil, t.cfg.MaxFrame)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !dl.IsZero() && errors.Is(err, os.ErrDeadlineExceeded) {
			// The socket's deadline is the context's and can fire a moment before the
			// context's own timer: it is the caller's deadline all the same.
			return nil, context.DeadlineExceeded
		}
		return nil, err
	}
	_ = rc.raw.SetDeadline(time.Time{})
	body, errText, err := decodeResponse(resp)
	if err != nil {
		return nil, err
	}
	if errText != "" {
		return nil, &multiraft.RemoteError{Node: to, Msg: errText}
	}
	return body, nil
}

// decodeResponse splits a response payload into the answer or the error's text.
func decodeResponse(p []byte) (body []byte, errText string, err error) {
	if len(p) == 0 {
		return nil, "", frameErr("empty response")
	}
	switch p[0] {
	case statusOK:
		return p[1:], "", nil
	case statusError:
		if len(p) == 1 {
			return nil, "unspecified error", nil
		}
		return nil, string(p[1:]), nil
	}
	return nil, "", frameErr("response status %d", p[0])
}

// decodeRequest splits a request payload into its group and bytes.
func decodeRequest(p []byte) (multiraft.GroupID, []byte, error) {
	g, n := binary.Uvarint(p)
	if n <= 0 {
		return 0, nil, frameErr("request: group id")
	}
	return multiraft.GroupID(g), p[n:], nil
}

func appendResponse(dst, body []byte, herr error) []byte {
	if herr != nil {
		msg := herr.Error()
		if len(msg) > maxErrorText {
			msg = msg[:maxErrorText]
		}
		if msg == "" {
			msg = "error"
		}
		return append(append(dst, statusError), msg...)
	}
	return append(append(dst, statusOK), body...)
}

func (p *peer) takeIdle() (*reqConn, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.idle); n > 0 {
		rc := p.idle[n-1]
		p.idle = p.idle[:n-1]
		return rc, true
	}
	return nil, false
}

func (p *peer) putIdle(rc *reqConn) {
	p.mu.Lock()
	if p.ctx.Err() == nil && len(p.idle) < maxIdleRequests {
		p.idle = append(p.idle, rc)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	p.t.untrack(rc.raw)
}

// closeIdle closes the kept request connections (the peer stopped).
func (p *peer) closeIdle() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, rc := range idle {
		p.t.untrack(rc.raw)
	}
}

// dialRequests opens a request stream to the peer: TCP, TLS and VerifyPeer as the raft
// stream's dial, then the hello with codeRequests.
func (p *peer) dialRequests(ctx context.Context) (*reqConn, error) {
	return p.dialCode(ctx, codeRequests)
}

// dialCode opens a connection to the peer that is not its raft stream, authenticated as
// that one is (TCP, TLS and VerifyPeer), with code in its hello.
func (p *peer) dialCode(ctx context.Context, code Code) (*reqConn, error) {
	t := p.t
	ctx, cancel := context.WithTimeout(ctx, t.cfg.DialTimeout+t.cfg.HandshakeTimeout)
	defer cancel()
	d := net.Dialer{Timeout: t.cfg.DialTimeout, KeepAlive: 15 * time.Second,
		Control: func(_, _ string, c syscall.RawConn) error { return limitUnacked(c, t.cfg.UnackedTimeout) }}
	raw, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, err
	}
	if !t.track(raw) {
		return nil, net.ErrClosed
	}
	stop := context.AfterFunc(ctx, func() { _ = raw.SetDeadline(time.Now()) })
	defer stop()
	conn := raw
	if t.cfg.ClientTLS != nil {
		cfg := t.cfg.ClientTLS
		if cfg.ServerName == "" {
			cfg = cfg.Clone()
			cfg.ServerName, _, _ = net.SplitHostPort(p.addr)
		}
		tc := tls.Client(raw, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			t.untrack(raw)
			return nil, fmt.Errorf("tls: %w", err)
		}
		conn = tc
		if t.cfg.VerifyPeer != nil {
			if err := t.cfg.VerifyPeer(p.id, tc.ConnectionState()); err != nil {
				t.untrack(raw)
				return nil, fmt.Errorf("peer's certificate refused: %w", err)
			}
		}
	}
	if err := t.handshake(conn, p.id, code); err != nil {
		t.untrack(raw)
		return nil, err
	}
	return &reqConn{conn: conn, raw: raw}, nil
}

// serveRequests answers a request stream's frames, one at a time, until it ends. The
// handler runs on this connection's goroutine.
func (t *Transport) serveRequests(conn net.Conn, from multiraft.NodeID, r Receiver, log *slog.Logger) {
	rh, _ := r.(multiraft.RequestHandler)
	var buf, out []byte
	for {
		_ = conn.SetReadDeadline(time.Now().Add(t.cfg.IdleTimeout))
		var err error
		if buf, err = readFrame(conn, buf, t.cfg.MaxFrame); err != nil {
			t.connEnded(log, err)
			return
		}
		group, req, err := decodeRequest(buf)
		if err != nil {
			t.stats.badFrames.Add(1)
			log.Warn("cluster transport: closing request stream from peer", "err", err)
			return
		}
		t.stats.requestsServed.Add(1)
		var body []byte
		herr := errNotServed
		if rh != nil {
			body, herr = rh.HandleRequest(from, group, bytes.Clone(req))
		}
		out = append(out[:0], make([]byte, frameHeader)...)
		out = appendResponse(out, body, herr)
		if len(out)-frameHeader > t.cfg.MaxFrame {
			out = appendResponse(out[:frameHeader], nil, fmt.Errorf("answer of %d bytes over the frame limit", len(out)))
		}
		out = sealFrame(out, 0)
		if err := t.writeProgress(conn, out); err != nil {
			log.Info("cluster transport: could not answer a request; closing the stream", "err", err)
			return
		}
		if cap(out) > 4<<20 {
			out = nil
		}
		if cap(buf) > 4<<20 {
			buf = nil
		}
	}
}

// writeProgress writes buf with a WriteTimeout per 64 KiB, as the raft stream does.
func (t *Transport) writeProgress(conn net.Conn, buf []byte) error {
	for len(buf) > 0 {
		n := min(len(buf), writeChunk)
		_ = conn.SetWriteDeadline(time.Now().Add(t.cfg.WriteTimeout))
		if _, err := conn.Write(buf[:n]); err != nil {
			return err
		}
		buf = buf[n:]
	}
	return nil
}
