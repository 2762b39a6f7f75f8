package tcptransport

import (
	"context"
	"fmt"
	"net"
	"sync"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// Byte streams (DialStream, Config.Streams): a connection whose dialler's hello carries
// code codeStreams+kind, authenticated exactly as the raft stream is (TLS, VerifyPeer,
// cluster and node ids), after which the transport steps aside: both ends read and write
// the connection as a plain byte stream of the host's own protocol, and the transport
// never looks inside. It is how a node reaches another node's services over the one
// authenticated, encrypted channel the cluster already has (a call forwarded to the
// leader of its queue, say) instead of a second listener and a second set of credentials.
//
// The kind (0..MaxStreamKind) is the host's: it names which of its services the stream is
// for. A listener with no Streams handler answers NotServed; a binary from before streams
// existed answers VersionMismatch. Either way DialStream fails before anything was sent
// on the stream, which the caller may take as "the peer never got it".
//
// A stream has no frames, no idle timeout and no write deadline of the transport's: the
// host's protocol sets its own. Transport.Close closes every stream, both ends.

// codeStreams is the first of the stream codes in the dialler's hello: codeStreams+kind.
const codeStreams Code = 0x80

// MaxStreamKind is the largest kind a stream may have.
const MaxStreamKind = 0x7f

// StreamHandler takes a byte stream peer from opened for kind. It owns conn from then on
// and closes it when done; it may return at once (handing conn to a server's listener) or
// serve conn until it ends.
type StreamHandler func(kind uint8, from multiraft.NodeID, conn net.Conn)

func isStream(c Code) bool { return c >= codeStreams }

// DialStream opens a byte stream of kind to node to: TCP, TLS and the handshake as every
// connection to a peer, within ctx (and DialTimeout+HandshakeTimeout). Closing the
// connection it returns ends the stream; so does Close.
func (t *Transport) DialStream(ctx context.Context, to multiraft.NodeID, kind uint8) (net.Conn, error) {
	if kind > MaxStreamKind {
		return nil, fmt.Errorf("tcptransport: stream kind %d over %d", kind, MaxStreamKind)
	}
	p := t.peer(to)
	if p == nil {
		return nil, fmt.Errorf("tcptransport: node %d is not a peer", to)
	}
	rc, err := p.dialCode(ctx, codeStreams+Code(kind))
	if err != nil {
		return nil, fmt.Errorf("tcptransport: stream to node %d: %w", to, err)
	}
	t.stats.streamsDialled.Add(1)
	return &streamConn{Conn: rc.conn, t: t, raw: rc.raw, closed: make(chan struct{})}, nil
}

// serveStream hands an accepted stream to the host's handler and waits until it is
// closed, by the handler or by Close, so the connection stays tracked (and closed on
// Close) for as long as it lives.
func (t *Transport) serveStream(conn, raw net.Conn, code Code, from multiraft.NodeID) {
	t.stats.streamsAccepted.Add(1)
	sc := &streamConn{Conn: conn, t: t, raw: raw, closed: make(chan struct{})}
	t.cfg.Streams(uint8(code-codeStreams), from, sc)
	select {
	case <-sc.closed:
	case <-t.ctx.Done():
	}
}

// streamConn is a byte stream's connection: closing it closes the TLS session (if any)
// and the socket, and forgets the socket.
type streamConn struct {
	net.Conn
	t      *Transport
	raw    net.Conn
	once   sync.Once
	closed chan struct{}
}

func (c *streamConn) Close() error {
	var err error
	c.once.Do(func() {
		err = c.Conn.Close()
		c.t.untrack(c.raw)
		close(c.closed)
	})
	return err
}
