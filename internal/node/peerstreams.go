package node

import (
	"context"
	"net"
	"strconv"
	"sync"

	"github.com/sluice-mq/sluice/internal/api"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/tcptransport"
)

// Calls forwarded over the cluster transport (docs/cluster.md, "Native API forwarding").
// A node forwards a native API call that came over TLS to the leader over a byte stream of
// the Raft transport (tcptransport.DialStream), not over the leader's plain HTTP listener:
// the channel is the cluster's own mutual TLS, the leader knows which node the call came
// from, and the forwarding node can vouch for the caller it authenticated (a client
// certificate cannot be passed on). The leader serves those streams as one more HTTP
// listener (server.ServeNodeHTTP), whose requests carry the peer's node id in their
// context (api.FromPeer), the only thing that makes api trust the caller a peer names.

// streamNativeHTTP is the kind of byte stream that carries native API calls.
const streamNativeHTTP uint8 = 1

// peerListener is the net.Listener of the streams peers open: the transport's stream
// handler hands each one over, and ServeNodeHTTP's server accepts them.
type peerListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPeerListener() *peerListener {
	return &peerListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// handle is the transport's StreamHandler: a stream of a kind this node serves waits for
// the server to accept it (the transport's goroutine for it blocks, nothing else); any
// other kind, or one arriving once the listener closed, is closed.
func (l *peerListener) handle(kind uint8, from multiraft.NodeID, conn net.Conn) {
	if kind != streamNativeHTTP {
		_ = conn.Close()
		return
	}
	select {
	case l.conns <- &peerConn{Conn: conn, node: int32(from)}:
	case <-l.done:
		_ = conn.Close()
	}
}

func (l *peerListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *peerListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *peerListener) Addr() net.Addr { return peerAddr("cluster transport") }

// peerConn is a stream from node: its remote address names the node, for log lines.
type peerConn struct {
	net.Conn
	node int32
}

func (c *peerConn) RemoteAddr() net.Addr {
	return peerAddr("node-" + strconv.Itoa(int(c.node)) + "@" + c.Conn.RemoteAddr().String())
}

type peerAddr string

func (a peerAddr) Network() string { return "sluice-cluster" }
func (a peerAddr) String() string  { return string(a) }

// peerContext is ServeNodeHTTP's connCtx: a request on a peer's stream is from that node.
func peerContext(ctx context.Context, c net.Conn) context.Context {
	if pc, ok := c.(*peerConn); ok {
		return api.FromPeer(ctx, pc.node)
	}
	return ctx
}

// dialPeer opens a native API stream to node, for api.Options.DialPeer.
func dialPeer(tr *tcptransport.Transport) func(context.Context, int32) (net.Conn, error) {
	return func(ctx context.Context, node int32) (net.Conn, error) {
		return tr.DialStream(ctx, multiraft.NodeID(node), streamNativeHTTP)
	}
}
