package node

import (
	"context"
	"net"
	"strconv"
	"sync"

	"github.com/sluice-mq/sluice/internal/api"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/peerhttp"
)

// Calls forwarded over the cluster transport (docs/cluster.md, "Native API forwarding").
// A node forwards a native API call or an SQS request that came over TLS to the leader over
// a byte stream of the Raft transport (tcptransport.DialStream), not over the leader's plain
// HTTP listener:
// the channel is the cluster's own mutual TLS, the leader knows which node the call came
// from, and the forwarding node can vouch for the caller it authenticated (a client
// certificate cannot be passed on; SQS needs no vouching, the leader checks the signature).
// The leader serves those streams as one more HTTP listener per kind (server.ServeNodeHTTP,
// ServeNodeSQS); a native call's requests carry the peer's node id in their context
// (api.FromPeer), the only thing that makes api trust the caller a peer names.

// The kinds of byte stream a node serves: native API calls, SQS requests.
const (
	streamNativeHTTP uint8 = 1
	streamSQS        uint8 = 2
)

// peerStreams are the listeners of the streams peers open, by kind.
type peerStreams struct{ native, sqs *peerListener }

func newPeerStreams() *peerStreams {
	return &peerStreams{native: newPeerListener(), sqs: newPeerListener()}
}

// handle is the transport's StreamHandler: a stream of a kind this node serves waits for
// its server to accept it (the transport's goroutine for it blocks, nothing else); any
// other kind is closed.
func (p *peerStreams) handle(kind uint8, from multiraft.NodeID, conn net.Conn) {
	switch kind {
	case streamNativeHTTP:
		p.native.hand(from, conn)
	case streamSQS:
		p.sqs.hand(from, conn)
	default:
		_ = conn.Close()
	}
}

// peerListener is the net.Listener of one kind of stream: the transport's stream handler
// hands each one over, and a server.ServeNode* server accepts them.
type peerListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPeerListener() *peerListener {
	return &peerListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// hand gives conn to the server, or closes it once the listener is closed.
func (l *peerListener) hand(from multiraft.NodeID, conn net.Conn) {
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

// dialPeer opens a stream of kind to a node, for api.Options.DialPeer (streamNativeHTTP)
// and sqs.Config.DialPeer (streamSQS). Nil without a cluster.
func dialPeer(cn *clusterNode, kind uint8) peerhttp.Dial {
	if cn == nil {
		return nil
	}
	return func(ctx context.Context, node int32) (net.Conn, error) {
		return cn.tr.DialStream(ctx, multiraft.NodeID(node), kind)
	}
}
