// Package api is sluice's native front-end: ConnectRPC handlers (Connect,
// gRPC and gRPC-Web on one mux) for every service of proto/sluice/v1.
//
// It owns translation only: protocol in, one broker call, protocol out, with
// broker errors mapped to Connect codes and an ErrorInfo reason through the
// single table in errors.go. It also owns the handler boundary: panics
// become `internal` errors, request bodies are bounded, every call's
// latency is recorded, and every call is authenticated and authorized
// (authz.go) before its handler runs. In a cluster it forwards a call
// answered NOT_LEADER to the leader's HTTP address, once (forward.go), and
// splits a Fetch or ListOffsets over partitions led by several nodes into
// one call per leader (topic_fanout.go): it owns that proxying, never the
// decision of who leads (the broker's).
//
// It must never hold queue, topic or group logic of its own (that belongs in
// internal/broker, where the Kafka and SQS front-ends share it), import
// internal/server, or keep state beyond what a streaming call needs.
package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/peerhttp"
	"github.com/sluice-mq/sluice/internal/telemetry"
	"github.com/sluice-mq/sluice/proto/sluice/v1/sluicev1connect"
)

// Options configure the API. Broker is required.
type Options struct {
	Broker *broker.Broker
	Logger *slog.Logger // default slog.Default()
	// MaxRequestBytes bounds one request message; 0 = 16 MiB.
	MaxRequestBytes int64
	// Draining is closed when the server starts shutting down: long polls
	// answer at once (empty) and Consume streams end. Nil never closes.
	Draining <-chan struct{}
	// ObserveRequest records a call's duration; nil records nothing.
	ObserveRequest func(protocol, operation string, d time.Duration)
	// Auth checks bearer tokens (and mTLS principals) and authorizes each
	// call; nil: authentication off, everything allowed.
	Auth *auth.Store
	// Tracer records spans and carries trace context (trace.go); nil: off.
	Tracer *telemetry.Tracer
	// DialPeer, in a cluster, opens a byte stream to another node over the cluster
	// transport, on which it serves its API to peers (forward.go): calls that came over
	// TLS are forwarded that way. Nil: they are not forwarded.
	DialPeer peerhttp.Dial
}

// Protocol is the label request metrics carry for this front-end.
const Protocol = "native"

// API implements the sluice.v1 services over a broker.
type API struct {
	b        *broker.Broker
	log      *slog.Logger
	maxBytes int64
	draining <-chan struct{}
	observe  func(protocol, operation string, d time.Duration)
	streams  *leases
	auth     *auth.Store       // nil: authentication off
	tracer   *telemetry.Tracer // nil: tracing off
	fwd      *forwarder        // in a cluster: forwards calls, and fans out (topic_fanout.go); else nil
	dialPeer peerhttp.Dial
}

// New returns the API over opts.Broker.
func New(opts Options) *API {
	a := &API{b: opts.Broker, log: opts.Logger, maxBytes: opts.MaxRequestBytes,
		draining: opts.Draining, observe: opts.ObserveRequest, streams: newLeases(), auth: opts.Auth, tracer: opts.Tracer,
		dialPeer: opts.DialPeer}
	if a.log == nil {
		a.log = slog.Default()
	}
	if a.maxBytes <= 0 {
		a.maxBytes = 16 << 20
	}
	if a.draining == nil {
		a.draining = make(chan struct{})
	}
	return a
}

// Route is one mount point: a path prefix and its handler.
type Route struct {
	Pattern string
	Handler http.Handler
	// Stream: the route's bodies are long-lived streams (StreamService),
	// each message bounded by MaxRequestBytes here, not the whole body.
	Stream bool
}

// Routes returns the handlers of every service, ready for a mux.
func (a *API) Routes() []Route {
	opts := a.HandlerOptions()
	wrap := func(h http.Handler) http.Handler { return h }
	if a.b != nil && a.b.Clustered() {
		// Calls for what another node leads go there (forward.go).
		f := newForwarder(a.b.NodeID(), a.nodeAddr, a.maxBytes, a.dialPeer, func(leader int32, err error) {
			a.log.Debug("api: forwarding failed", "leader", leader, "err", err)
		})
		wrap, a.fwd = f.wrap, f
		opts = append(opts, connect.WithInterceptors(forwardInterceptor{}))
	}
	var out []Route
	add := func(p string, h http.Handler) { out = append(out, Route{p, wrap(withConnState(h)), false}) }
	add(sluicev1connect.NewQueueServiceHandler(&queueService{a}, opts...))
	add(sluicev1connect.NewDeadLetterServiceHandler(&deadLetterService{a}, opts...))
	add(sluicev1connect.NewTopicServiceHandler(&topicService{API: a}, opts...))
	add(sluicev1connect.NewGroupServiceHandler(&groupService{API: a}, opts...))
	// The streams are never forwarded (the forwarder reads a whole body
	// first): in a cluster each entry for another node's partition or queue
	// is answered NOT_LEADER with the leader, and the client goes there.
	p, h := sluicev1connect.NewStreamServiceHandler(&streamService{a}, a.HandlerOptions()...)
	out = append(out, Route{p, withConnState(withCork(h)), true})
	return out
}

// nodeAddr is the HTTP address node registered in the catalog ("" if none).
func (a *API) nodeAddr(node int32) string {
	for _, n := range a.b.ClusterNodes() {
		if n.ID == node {
			return n.HTTPAddr
		}
	}
	return ""
}

// compressMinBytes is the smallest response body worth gzip. Receives and
// Consume stream messages are a few KiB: compressing each one with a fresh
// compressor cost 35 % of the broker's CPU in the queue round-trip benchmark
// (docs/benchmarks.md) and saved little on loopback or a LAN.
const compressMinBytes = 64 << 10

// HandlerOptions are the options every handler is built with: the size
// limit, compression only for large responses, the panic boundary and the
// metrics and auth interceptors.
func (a *API) HandlerOptions() []connect.HandlerOption {
	opts := []connect.HandlerOption{
		connect.WithReadMaxBytes(int(a.maxBytes)),
		connect.WithCompressMinBytes(compressMinBytes),
		// Metrics outermost, so refused calls are timed and counted too.
		connect.WithInterceptors(metricsInterceptor{a.observe}, authInterceptor{a}),
		connect.WithRecover(func(_ context.Context, spec connect.Spec, _ http.Header, v any) error {
			logPanic(a.log, spec.Procedure, v, string(debug.Stack()))
			return apiError(connect.CodeInternal, ReasonInternal,
				errors.New("internal error; the server log has the details"), nil)
		}),
	}
	if a.tracer.Enabled() {
		// Inside auth: a refused call is not traced as a messaging
		// operation (its metrics still count it).
		opts = append(opts, connect.WithInterceptors(traceInterceptor{a.tracer}))
	}
	return opts
}

// untilDrain returns a context that also ends when the server starts
// draining, so a long poll answers instead of holding shutdown up.
func (a *API) untilDrain(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		// Owned by the call: it ends when ctx does, which the caller's
		// deferred cancel guarantees.
		select {
		case <-a.draining:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// metricsInterceptor records sluice_request_duration_seconds for every
// call, labelled with the method name (a fixed set, never user input).
type metricsInterceptor struct {
	observe func(protocol, operation string, d time.Duration)
}

func operation(procedure string) string {
	return procedure[strings.LastIndexByte(procedure, '/')+1:]
}

func (m metricsInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		start := time.Now()
		defer func() {
			if m.observe != nil {
				m.observe(Protocol, operation(req.Spec().Procedure), time.Since(start))
			}
		}()
		return next(ctx, req)
	}
}

func (m metricsInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (m metricsInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		start := time.Now()
		defer func() {
			if m.observe != nil {
				m.observe(Protocol, operation(conn.Spec().Procedure), time.Since(start))
			}
		}()
		return next(ctx, conn)
	}
}
