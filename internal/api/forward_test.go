package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluice-mq/sluice/client"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
	"github.com/sluice-mq/sluice/proto/sluice/v1/sluicev1connect"
)

// fakeNode is a QueueService that leads nothing (every call answers NOT_LEADER naming
// leader) or, with leader 0, leads: Send answers with what it was sent (the caller's
// Authorization and the forwarding mark) and Consume streams three messages, or one
// before failing NOT_LEADER when failAfterOne names a leader.
type fakeNode struct {
	sluicev1connect.UnimplementedQueueServiceHandler
	leader       int32
	failAfterOne int32
	cutAfterOne  bool // the connection dies after the first message (the leader is killed)
	calls        atomic.Int32
}

func notLeaderErr(leader int32) error {
	return apiError(connect.CodeUnavailable, ReasonNotLeader, errors.New("not the leader of queue q"),
		map[string]string{"leader": fmt.Sprint(leader)})
}

func (f *fakeNode) Send(_ context.Context, req *connect.Request[sluicev1.SendRequest]) (*connect.Response[sluicev1.SendResponse], error) {
	f.calls.Add(1)
	if f.leader != 0 {
		return nil, notLeaderErr(f.leader)
	}
	if f.cutAfterOne {
		panic(http.ErrAbortHandler)
	}
	id := req.Header().Get("Authorization") + "|" + req.Header().Get(forwardedHeader) + "|" + string(req.Msg.GetMessage().GetBody())
	return connect.NewResponse(&sluicev1.SendResponse{Result: &sluicev1.SendResult{MessageId: id}}), nil
}

func (f *fakeNode) Consume(_ context.Context, _ *connect.Request[sluicev1.ConsumeRequest], s *connect.ServerStream[sluicev1.ConsumeResponse]) error {
	f.calls.Add(1)
	if f.leader != 0 {
		return notLeaderErr(f.leader)
	}
	for i := range 3 {
		if err := s.Send(&sluicev1.ConsumeResponse{Message: &sluicev1.Message{Id: fmt.Sprint(i)}}); err != nil {
			return err
		}
		if f.failAfterOne != 0 {
			return notLeaderErr(f.failAfterOne)
		}
		if f.cutAfterOne {
			panic(http.ErrAbortHandler)
		}
	}
	return nil
}

// fakeCluster serves fake nodes 1..n, each behind its own forwarder.
type fakeCluster struct {
	nodes []*fakeNode
	urls  []string
	addrs map[int32]string
}

func newFakeCluster(t testing.TB, nodes ...*fakeNode) *fakeCluster {
	c := &fakeCluster{nodes: nodes, addrs: map[int32]string{}}
	for i, n := range nodes {
		self := int32(i + 1)
		f := newForwarder(self, func(id int32) string { return c.addrs[id] }, 1<<20, nil, func(int32, error) {})
		_, h := sluicev1connect.NewQueueServiceHandler(n, connect.WithInterceptors(forwardInterceptor{}))
		srv := httptest.NewUnstartedServer(f.wrap(h))
		srv.Config.Protocols = new(http.Protocols)
		srv.Config.Protocols.SetHTTP1(true)
		srv.Config.Protocols.SetUnencryptedHTTP2(true)
		srv.Start()
		t.Cleanup(srv.Close)
		c.urls = append(c.urls, srv.URL)
		c.addrs[self] = strings.TrimPrefix(srv.URL, "http://")
	}
	return c
}

// TestForwardToLeader: a call for what node 2 leads, made on node 1, is answered by node 2
// with the caller's credential, in every protocol, unary and streaming.
func TestForwardToLeader(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := newFakeCluster(t, &fakeNode{leader: 2}, &fakeNode{})
	for name, p := range map[string]client.Protocol{"connect": client.ProtocolConnect, "json": client.ProtocolConnectJSON,
		"grpc": client.ProtocolGRPC, "grpc-web": client.ProtocolGRPCWeb} {
		t.Run(name, func(t *testing.T) {
			cl := client.New(c.urls[0], noRetry, client.WithProtocol(p), client.WithToken("tok"))
			res, err := cl.Send(ctx, "q", []byte("hello"))
			if err != nil {
				t.Fatalf("send through node 1: %v", err)
			}
			if want := "Bearer tok|1|hello"; res.GetMessageId() != want {
				t.Errorf("the leader saw %q, want %q (credential, forwarding node, body)", res.GetMessageId(), want)
			}
			var got []string
			for m, err := range cl.Consume(ctx, "q") {
				if err != nil {
					t.Fatalf("consume through node 1: %v", err)
				}
				got = append(got, m.GetId())
			}
			if strings.Join(got, ",") != "0,1,2" {
				t.Errorf("consumed %v through node 1, want the leader's 0,1,2", got)
			}
		})
	}
}

// TestForwardOnce: a forwarded call that meets another NOT_LEADER (leadership moved on) is
// answered unavailable, not forwarded again; so is a call whose leader cannot be reached,
// and a stream that failed after sending a message.
func TestForwardOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	t.Run("leadership moved", func(t *testing.T) {
		// 1 believes 2 leads, 2 believes 1 does: a loop if a forwarded call were forwarded.
		c := newFakeCluster(t, &fakeNode{leader: 2}, &fakeNode{leader: 1})
		_, err := client.New(c.urls[0], noRetry).Send(ctx, "q", []byte("x"))
		wantNotLeader(t, err, "1")
		if a, b := c.nodes[0].calls.Load(), c.nodes[1].calls.Load(); a != 1 || b != 1 {
			t.Errorf("node 1 served %d calls and node 2 %d, want one each", a, b)
		}
	})
	t.Run("leader unreachable", func(t *testing.T) {
		c := newFakeCluster(t, &fakeNode{leader: 2})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		c.addrs[2] = ln.Addr().String()
		ln.Close()
		_, err = client.New(c.urls[0], noRetry).Send(ctx, "q", []byte("x"))
		wantNotLeader(t, err, "2")
		for _, err := range client.New(c.urls[0], noRetry).Consume(ctx, "q") {
			wantNotLeader(t, err, "2")
		}
	})
	t.Run("stream failed after a message", func(t *testing.T) {
		c := newFakeCluster(t, &fakeNode{failAfterOne: 2}, &fakeNode{})
		var got []string
		var last error
		for m, err := range client.New(c.urls[0], noRetry).Consume(ctx, "q") {
			if err != nil {
				last = err
				break
			}
			got = append(got, m.GetId())
		}
		wantNotLeader(t, last, "2")
		if len(got) != 1 || c.nodes[1].calls.Load() != 0 {
			t.Errorf("got %v and node 2 served %d calls: a stream that sent a message must not be forwarded", got, c.nodes[1].calls.Load())
		}
	})
	t.Run("body over the limit", func(t *testing.T) {
		// Not held for forwarding (the limit is 1 MiB here): the node answers itself.
		c := newFakeCluster(t, &fakeNode{leader: 2}, &fakeNode{})
		_, err := client.New(c.urls[0], noRetry).Send(ctx, "q", make([]byte, 1<<20+1))
		wantNotLeader(t, err, "2")
		if n := c.nodes[1].calls.Load(); n != 0 {
			t.Errorf("node 2 served %d calls", n)
		}
	})
	t.Run("marked forwarded by the client", func(t *testing.T) {
		c := newFakeCluster(t, &fakeNode{leader: 2}, &fakeNode{})
		hc := &http.Client{Transport: headerTransport{forwardedHeader, "9"}}
		_, err := client.New(c.urls[0], noRetry, client.WithHTTPClient(hc)).Send(ctx, "q", []byte("x"))
		wantNotLeader(t, err, "2")
	})
}

// TestForwardCut: the leader dies while it answers a forwarded call. The client sees
// unavailable in its own protocol (which it retries), not a truncated answer: a stream
// ends after the messages that came whole; a unary call that reached the leader is
// unavailable without NOT_LEADER — it may have been carried out, and a client retries
// NOT_LEADER as "not done" (an Ack that happened came back RECEIPT_STALE on the retry in
// TestNativeThroughFollower, and a Send would be stored twice).
func TestForwardCut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := newFakeCluster(t, &fakeNode{leader: 2}, &fakeNode{cutAfterOne: true})
	for name, p := range map[string]client.Protocol{"connect": client.ProtocolConnect, "json": client.ProtocolConnectJSON,
		"grpc": client.ProtocolGRPC, "grpc-web": client.ProtocolGRPCWeb} {
		t.Run(name, func(t *testing.T) {
			cl := client.New(c.urls[0], noRetry, client.WithProtocol(p))
			_, err := cl.Send(ctx, "q", []byte("x"))
			var e *client.Error
			if !errors.As(err, &e) || e.Code != connect.CodeUnavailable || e.Reason == ReasonNotLeader {
				t.Fatalf("send whose forward was cut: %v, want unavailable, not NOT_LEADER", err)
			}
			var got []string
			var last error
			for m, err := range cl.Consume(ctx, "q") {
				if err != nil {
					last = err
					break
				}
				got = append(got, m.GetId())
			}
			if len(got) != 1 || connect.CodeOf(last) != connect.CodeUnavailable {
				t.Errorf("got %v then %v; want message 0, then unavailable", got, last)
			}
		})
	}
}

// TestForwardNoConnection: a leader that cannot be reached at all (its port is closed)
// never got the call: the held NOT_LEADER is the answer, which clients retry.
func TestForwardNoConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := newFakeCluster(t, &fakeNode{leader: 2}, &fakeNode{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.addrs[2] = ln.Addr().String()
	ln.Close()
	for name, p := range map[string]client.Protocol{"connect": client.ProtocolConnect, "grpc": client.ProtocolGRPC} {
		t.Run(name, func(t *testing.T) {
			_, err := client.New(c.urls[0], noRetry, client.WithProtocol(p)).Send(ctx, "q", []byte("x"))
			wantNotLeader(t, err, "2")
		})
	}
}

type headerTransport struct{ k, v string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.k, h.v)
	return http.DefaultTransport.RoundTrip(r)
}

func wantNotLeader(t *testing.T, err error, leader string) {
	t.Helper()
	var e *client.Error
	if !errors.As(err, &e) || e.Code != connect.CodeUnavailable || e.Reason != ReasonNotLeader || e.Metadata["leader"] != leader {
		t.Fatalf("got %v, want unavailable NOT_LEADER naming node %s", err, leader)
	}
}

// TestFetchLeader: a Fetch is forwarded only when every partition is led by one other node.
func TestFetchLeader(t *testing.T) {
	nl := func(l string) *sluicev1.ErrorInfo {
		return &sluicev1.ErrorInfo{Reason: ReasonNotLeader, Metadata: map[string]string{"leader": l}}
	}
	parts := func(errs ...*sluicev1.ErrorInfo) *sluicev1.FetchResponse {
		out := &sluicev1.FetchResponse{}
		for _, e := range errs {
			out.Partitions = append(out.Partitions, &sluicev1.PartitionRecords{Error: e})
		}
		return out
	}
	for _, tc := range []struct {
		name string
		in   *sluicev1.FetchResponse
		want int32
	}{
		{"one partition led by 2", parts(nl("2")), 2},
		{"all led by 3", parts(nl("3"), nl("3")), 3},
		{"two leaders", parts(nl("2"), nl("3")), 0},
		{"one served here", parts(nl("2"), nil), 0},
		{"leader unknown", parts(nl("")), 0},
		{"another error", parts(&sluicev1.ErrorInfo{Reason: ReasonOffsetOutOfRange}), 0},
	} {
		if got := fetchLeader(tc.in); got != tc.want {
			t.Errorf("%s: fetchLeader = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// BenchmarkForward: a Send served where it arrives, without and with the forwarding
// wrapper (the cost every call of a cluster pays), and one forwarded to the leader.
func BenchmarkForward(b *testing.B) {
	ctx := context.Background()
	_, plain := sluicev1connect.NewQueueServiceHandler(&fakeNode{})
	srv := httptest.NewServer(plain)
	b.Cleanup(srv.Close)
	c := newFakeCluster(b, &fakeNode{}, &fakeNode{leader: 1})
	for _, bc := range []struct{ name, url string }{
		{"local-unwrapped", srv.URL}, {"local-wrapped", c.urls[0]}, {"forwarded", c.urls[1]},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cl := client.New(bc.url)
			body := make([]byte, 1024)
			for b.Loop() {
				if _, err := cl.Send(ctx, "q", body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// noRetry: these tests watch what the server answers to one call, so the client must not
// retry NOT_LEADER itself (the Go client does by default, client/retry.go).
var noRetry = client.WithNotLeaderRetry(0)

// TestForwardOverTLSViaPeer: a call that came over TLS is forwarded over the peer stream
// (DialPeer), not to the leader's plain listener: in every protocol, unary and streaming
// (gRPC over HTTP/2 on both legs), without the client's credential, which the leader does
// not need; a node without DialPeer answers it NOT_LEADER, as before. A plain call for a
// leader with no plain listener registered goes over the peer stream too.
func TestForwardOverTLSViaPeer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	leader := &fakeNode{}
	_, lh := sluicev1connect.NewQueueServiceHandler(leader, connect.WithInterceptors(forwardInterceptor{}))
	// The leader's peer streams: a plain listener whose requests are from node 1.
	peerSrv := httptest.NewUnstartedServer(newForwarder(2, func(int32) string { return "" }, 1<<20, nil, func(int32, error) {}).wrap(lh))
	peerSrv.Config.Protocols = new(http.Protocols)
	peerSrv.Config.Protocols.SetHTTP1(true)
	peerSrv.Config.Protocols.SetUnencryptedHTTP2(true)
	peerSrv.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context { return FromPeer(ctx, 1) }
	peerSrv.Start()
	t.Cleanup(peerSrv.Close)
	var dialled atomic.Int32
	dial := func(ctx context.Context, node int32) (net.Conn, error) {
		dialled.Add(1)
		if node != 2 {
			return nil, fmt.Errorf("dialled node %d", node)
		}
		return (&net.Dialer{}).DialContext(ctx, "tcp", strings.TrimPrefix(peerSrv.URL, "http://"))
	}
	start := func(dial func(context.Context, int32) (net.Conn, error)) *httptest.Server {
		f := newForwarder(1, func(int32) string { return "127.0.0.1:1" }, 1<<20, dial, func(int32, error) {})
		_, h := sluicev1connect.NewQueueServiceHandler(&fakeNode{leader: 2}, connect.WithInterceptors(forwardInterceptor{}))
		srv := httptest.NewUnstartedServer(f.wrap(h))
		srv.EnableHTTP2 = true
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return srv
	}
	tlsNode := start(dial)
	for name, p := range map[string]client.Protocol{"connect": client.ProtocolConnect, "json": client.ProtocolConnectJSON,
		"grpc": client.ProtocolGRPC, "grpc-web": client.ProtocolGRPCWeb} {
		t.Run(name, func(t *testing.T) {
			cl := client.New(tlsNode.URL, noRetry, client.WithProtocol(p), client.WithToken("tok"),
				client.WithTLS(tlsNode.Client().Transport.(*http.Transport).TLSClientConfig))
			res, err := cl.Send(ctx, "q", []byte("hello"))
			if err != nil {
				t.Fatalf("send over TLS through node 1: %v", err)
			}
			if want := "|1|hello"; res.GetMessageId() != want {
				t.Errorf("the leader saw %q, want %q (no credential, forwarding node, body)", res.GetMessageId(), want)
			}
			var got []string
			for m, err := range cl.Consume(ctx, "q") {
				if err != nil {
					t.Fatalf("consume over TLS through node 1: %v", err)
				}
				got = append(got, m.GetId())
			}
			if strings.Join(got, ",") != "0,1,2" {
				t.Errorf("consumed %v through node 1, want the leader's 0,1,2", got)
			}
		})
	}
	if dialled.Load() == 0 {
		t.Error("no call went over the peer stream")
	}
	old := start(nil)
	_, err := client.New(old.URL, noRetry, client.WithTLS(old.Client().Transport.(*http.Transport).TLSClientConfig)).Send(ctx, "q", []byte("x"))
	wantNotLeader(t, err, "2")

	// A plain call for a leader that registered no plain listener goes the same way.
	f := newForwarder(1, func(int32) string { return "" }, 1<<20, dial, func(int32, error) {})
	_, h := sluicev1connect.NewQueueServiceHandler(&fakeNode{leader: 2}, connect.WithInterceptors(forwardInterceptor{}))
	plain := httptest.NewServer(f.wrap(h))
	t.Cleanup(plain.Close)
	before := dialled.Load()
	res, err := client.New(plain.URL, noRetry, client.WithToken("tok")).Send(ctx, "q", []byte("plain"))
	if err != nil || res.GetMessageId() != "|1|plain" || dialled.Load() == before {
		t.Errorf("a plain call for a leader without a plain listener: %v, %v (streams dialled %d)", res, err, dialled.Load()-before)
	}
}
