package api

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/peerhttp"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// Forwarding inside a cluster (docs/cluster.md, "Native API"). A call the broker answers
// with NOT_LEADER naming a leader is proxied once, as it came (method, path, query,
// headers, body), to the leader's registered HTTP address, and the leader's answer —
// unary or a Consume stream — is passed back: the client never sees leadership.
//
// Identity: the call is authenticated and authorized here before any broker call (a
// refused call is never forwarded). A call that came in clear text is forwarded to the
// leader's registered plain HTTP listener with the client's own Authorization header,
// which the leader checks again: no node vouches for a principal there, so every node
// needs the same --auth-file (as SQS forwarding, where the leader checks the SigV4
// signature again, needs already), and no header a client could forge (the forwarded
// marker included) grants anything: the marker only stops a second forward.
//
// A call that came over TLS is forwarded over a byte stream of the cluster transport
// instead (DialPeer; node/peerstreams.go): the cluster's own mutual TLS, so what the
// client sent encrypted is not sent on in clear, and the leader knows which node sends
// it. That node names the caller it authenticated (principalHeader) — a client
// certificate cannot be passed on — and the leader authorizes that principal against its
// own rules. It trusts the name only on a peer's stream (FromPeer), which only a node
// holding a cluster certificate can open: a node that can already vote and append to
// every log. The client's Authorization does not travel on.
//
// Mechanism: the request body (one message for every sluice procedure: none streams from
// the client) is read before the handler runs, and the handler's answer is held back
// (holdWriter) until it ends or flushes; if the handler marked the call (a NOT_LEADER
// error, or a Fetch whose every partition is led by one other node) and nothing was sent
// yet, the held answer is dropped and the call forwarded. A forward that cannot connect
// (the leader just died) answers the held NOT_LEADER, Connect unavailable, which clients
// retry as not carried out; one that fails after the call was sent answers unavailable
// without that reason: it may have been carried out.
// A call that arrives forwarded is never forwarded again (no loops while leadership
// moves).

// forwardedHeader marks a forwarded call; its value is the forwarding node's id.
const forwardedHeader = "Sluice-Forwarded-By"

// principalHeader names, on a call forwarded over the cluster transport, the caller the
// forwarding node authenticated (path-escaped). Read only on a peer's stream.
const principalHeader = "Sluice-Forwarded-Principal"

// holdMax bounds the answer held back before it is sent as it is: a NOT_LEADER answer
// is far smaller, and a larger one (a big Fetch) is not doubled in memory.
const holdMax = 64 << 10

// hopHeaders are not passed on by a proxy (RFC 9110 7.6.1).
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// forwarder proxies marked calls to their leader.
type forwarder struct {
	self     int32
	addr     func(node int32) string // a node's registered HTTP host:port, "" unknown
	maxBytes int64
	h1, h2c  *http.Client // Connect and gRPC-Web over HTTP/1.1; gRPC over cleartext HTTP/2
	// viaPeer are h1 and h2c over the cluster transport (nil: TLS calls not forwarded).
	viaPeer *[2]*http.Client
	onError func(leader int32, err error)
}

func newForwarder(self int32, addr func(int32) string, maxBytes int64, dialPeer peerhttp.Dial, onError func(int32, error)) *forwarder {
	mk := func(h2c bool, dial func(context.Context, string, string) (net.Conn, error)) *http.Client {
		t := &http.Transport{
			DialContext:         dial,
			MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second,
			// The client's Accept-Encoding is passed on: the body goes back as it came.
			DisableCompression: true,
		}
		if h2c {
			var p http.Protocols
			p.SetUnencryptedHTTP2(true)
			t.Protocols = &p
		}
		// No overall timeout: a long poll or a Consume stream holds the answer open; the
		// client's context (its deadline header is passed on too) bounds it.
		return &http.Client{Transport: t,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	direct := (&net.Dialer{Timeout: 2 * time.Second}).DialContext
	f := &forwarder{self: self, addr: addr, maxBytes: maxBytes, h1: mk(false, direct), h2c: mk(true, direct), onError: onError}
	if dialPeer != nil {
		// A stream that could not be opened carried nothing: its error is a dial's
		// (notSent), and the held NOT_LEADER is answered.
		viaPeer := peerhttp.DialContext(dialPeer)
		f.viaPeer = &[2]*http.Client{mk(false, viaPeer), mk(true, viaPeer)}
	}
	return f
}

// route is how this node reaches node for a call that came over TLS or not: the base URL
// and the HTTP/1.1 and HTTP/2 clients, and whether it is the cluster transport (false:
// node's plain HTTP listener). False if node is this one or cannot be reached that way
// (no registered address; a TLS call on a node that does not forward them).
func (f *forwarder) route(node int32, overTLS bool) (base string, h1, h2c *http.Client, peer, ok bool) {
	if node == f.self || node == 0 {
		return "", nil, nil, false, false
	}
	addr := ""
	if !overTLS {
		addr = f.addr(node)
	}
	switch {
	case addr != "":
		return "http://" + addr, f.h1, f.h2c, false, true
	case f.viaPeer != nil:
		// A TLS call, or one for a node with no plain listener registered (serving its
		// API over TLS only): over the cluster transport.
		return "http://" + peerhttp.Host(node), f.viaPeer[0], f.viaPeer[1], true, true
	}
	return "", nil, nil, false, false
}

// setIdentity sets the headers that say who a forwarded call is from and for: the
// forwarded mark, and over the cluster transport the caller this node authenticated in
// place of the client's credential (Anonymous: authentication is off here, and nothing is
// named).
func (f *forwarder) setIdentity(h http.Header, peer bool, p auth.Principal) {
	h.Set(forwardedHeader, strconv.Itoa(int(f.self)))
	if !peer {
		return
	}
	h.Del("Authorization")
	h.Del(principalHeader)
	if p != auth.Anonymous {
		h.Set(principalHeader, url.PathEscape(string(p)))
	}
}

// fwdSlot is a call's mark: the node to forward it to (0: none), and what forwarding
// needs to know of the call: whether it came over TLS, and who made it.
type fwdSlot struct {
	leader    int32
	overTLS   bool
	principal auth.Principal
}

const fwdKey ctxKey = 100

// markForward asks for the call to be forwarded to leader once its handler returns; it
// reports whether the call can be (it arrived in a cluster, not forwarded, and over TLS
// only where TLS calls are forwarded).
func markForward(ctx context.Context, leader int32) bool {
	s, _ := ctx.Value(fwdKey).(*fwdSlot)
	if s == nil || leader == 0 {
		return false
	}
	s.leader = leader
	s.principal = principalOf(ctx)
	return true
}

// peerKey marks the context of a request that came on a peer's stream.
const peerKey ctxKey = 101

// FromPeer marks ctx, a request's on a stream the cluster transport authenticated as
// node's: the only requests whose principalHeader is believed.
func FromPeer(ctx context.Context, node int32) context.Context {
	return context.WithValue(ctx, peerKey, node)
}

// peerOf is the node a request's stream came from (0: not a peer's stream).
func peerOf(ctx context.Context) int32 {
	n, _ := ctx.Value(peerKey).(int32)
	return n
}

// wrap serves h, forwarding the calls it marks.
func (f *forwarder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(forwardedHeader) != "" || (r.TLS != nil && f.viaPeer == nil) {
			h.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, f.maxBytes+1))
		if err != nil || int64(len(body)) > f.maxBytes {
			// Not forwardable; the handler reads the rest and refuses or fails as usual.
			r2 := r.WithContext(r.Context()) // a copy: the caller's request keeps its body
			r2.Body = readCloser{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
			h.ServeHTTP(w, r2)
			return
		}
		slot := &fwdSlot{overTLS: r.TLS != nil}
		r2 := r.WithContext(context.WithValue(r.Context(), fwdKey, slot))
		r2.Body = io.NopCloser(bytes.NewReader(body))
		hw := &holdWriter{w: w, hdr: http.Header{}, slot: slot}
		h.ServeHTTP(hw, r2)
		if slot.leader != 0 && !hw.sent && f.forward(w, r, body, slot) {
			return
		}
		hw.finish()
	})
}

type readCloser struct {
	io.Reader
	io.Closer
}

// forward proxies the call to the leader slot names and reports whether it answered;
// false leaves the held answer to be sent.
func (f *forwarder) forward(w http.ResponseWriter, r *http.Request, body []byte, slot *fwdSlot) bool {
	leader := slot.leader
	base, h1, h2c, peer, ok := f.route(leader, slot.overTLS)
	if !ok {
		return false
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, base+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		f.onError(leader, err)
		return false
	}
	req.Header = r.Header.Clone()
	for _, k := range hopHeaders {
		req.Header.Del(k)
	}
	f.setIdentity(req.Header, peer, slot.principal)
	p := wireOf(r)
	hc := h1
	if p == wireGRPC && r.ProtoMajor == 2 {
		hc = h2c                         // gRPC needs HTTP/2 end to end (trailers)
		req.Header.Set("Te", "trailers") // hop-by-hop, but gRPC's spec asks for it on every hop
	}
	resp, err := hc.Do(req)
	if err != nil {
		f.onError(leader, err)
		if notSent(err) {
			return false // the held NOT_LEADER: the leader never got the call
		}
		// The call may have reached the leader and been carried out (its answer was
		// lost when the leader died): NOT_LEADER, which clients retry as "not done",
		// would turn an Ack that happened into a stale receipt on the retry and a Send
		// into two messages. Unavailable without that reason, as for a forward cut
		// mid-answer: the outcome is unknown.
		cutBeforeAnswer(w, r, p, leader, err)
		return true
	}
	defer resp.Body.Close()
	passBack(w, resp, p, leader)
	return true
}

// notSent: the forward failed before the request could reach the leader (no
// connection: refused, unreachable, timed out while dialling).
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// holdWriter holds a handler's answer back until the handler returns, flushes (a
// stream's first message; Connect also flushes the end of every stream and every gRPC
// answer, after the interceptor marked it) or writes more than holdMax; then it is sent
// as written.
type holdWriter struct {
	w      http.ResponseWriter
	slot   *fwdSlot // a marked call's answer is held through the flush that ends it
	hdr    http.Header
	status int
	buf    bytes.Buffer
	sent   bool
}

func (h *holdWriter) Header() http.Header {
	if h.sent {
		return h.w.Header()
	}
	return h.hdr
}

func (h *holdWriter) WriteHeader(code int) {
	if h.sent {
		h.w.WriteHeader(code)
	} else if h.status == 0 {
		h.status = code
	}
}

func (h *holdWriter) Write(p []byte) (int, error) {
	if h.sent {
		return h.w.Write(p)
	}
	if h.status == 0 {
		h.status = http.StatusOK
	}
	h.buf.Write(p)
	if h.buf.Len() > holdMax {
		if err := h.send(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func (h *holdWriter) Flush() {
	if h.slot.leader != 0 && !h.sent {
		return // the flush of an answer that may be dropped for the leader's
	}
	if h.send() == nil {
		if fl, ok := h.w.(http.Flusher); ok {
			fl.Flush()
		}
	}
}

// Unwrap lets http.ResponseController reach the connection (deadlines).
func (h *holdWriter) Unwrap() http.ResponseWriter { return h.w }

// send writes what is held and passes everything after it through.
func (h *holdWriter) send() error {
	if h.sent {
		return nil
	}
	h.sent = true
	for k, vs := range h.hdr {
		h.w.Header()[k] = vs
	}
	if h.status == 0 {
		h.status = http.StatusOK
	}
	h.w.WriteHeader(h.status)
	_, err := h.w.Write(h.buf.Bytes())
	h.buf = bytes.Buffer{}
	return err
}

// finish sends the held answer, and trailers set on the held header after it was sent
// (gRPC's status travels in trailers).
func (h *holdWriter) finish() {
	if !h.sent {
		_ = h.send()
		return
	}
	for k, vs := range h.hdr {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			h.w.Header()[k] = vs
		}
	}
}

// forwardInterceptor marks a call whose handler answered NOT_LEADER naming a leader.
type forwardInterceptor struct{}

func (forwardInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		resp, err := next(ctx, req)
		if l := notLeader(err); l != 0 {
			markForward(ctx, l)
		}
		return resp, err
	}
}

func (forwardInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (forwardInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		err := next(ctx, conn)
		if l := notLeader(err); l != 0 {
			markForward(ctx, l) // too late if the stream sent a message: holdWriter knows
		}
		return err
	}
}

// notLeader is the leader a NOT_LEADER error names (0: another error, or no leader).
func notLeader(err error) int32 {
	var cerr *connect.Error
	if err == nil || !errors.As(err, &cerr) || cerr.Code() != connect.CodeUnavailable {
		return 0
	}
	return leaderOf(errorInfoOf(err))
}

// leaderOf is the leader a NOT_LEADER ErrorInfo names (0: another reason, or none).
func leaderOf(info *sluicev1.ErrorInfo) int32 {
	if info.GetReason() != ReasonNotLeader {
		return 0
	}
	n, err := strconv.ParseInt(info.GetMetadata()["leader"], 10, 32)
	if err != nil || n <= 0 {
		return 0
	}
	return int32(n)
}
