package server

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync/atomic"

	"connectrpc.com/connect"

	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// wrap puts every HTTP handler behind the guards no handler may forget: a
// request body limit in bytes and in time (body.go) and a panic boundary.
// A front-end's handler answers an over-limit body in its own protocol;
// the server's own (health, metrics) and unknown paths answer 413.
func (s *Server) wrap(next http.Handler, limit int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw := &trackingWriter{ResponseWriter: w}
		defer s.recoverPanic(rw, r)
		if s.isStreamRoute(r) {
			next.ServeHTTP(rw, r) // its handler bounds each message (RegisterStreamHTTP)
			return
		}
		g := bodyGuard{limit: limit, timeout: s.cfg.ReadBodyTimeout, ownAnswer: s.isFrontendRoute, refuse: rw.refuse}
		r2, ok := g.apply(rw, w, r)
		if !ok {
			return
		}
		next.ServeHTTP(rw, r2)
	})
}

// untilMounted answers every request but the server's own (health, readiness, metrics)
// with 503 and Retry-After while the setups run: the HTTP listener serves /healthz during
// recovery, before the broker has mounted the native API, and a client that came early
// would otherwise get a 404 — "unimplemented" to a Connect client, which does not retry —
// for a route that exists a moment later. A 503 is "unavailable" to Connect and every HTTP
// client, which retry it. Once mounted, it is never in the way again (a drain clears
// readiness, not this).
//
// A call of a procedure in an RPC protocol (Connect, gRPC, gRPC-Web) gets its answer in
// that protocol, with the NOT_READY reason docs/api.md promises for a recovering broker:
// a plain-text body would reach the client as a bare "unavailable" it cannot tell from a
// network failure (client.ErrNotReady would never match). Anything else gets plain text.
func (s *Server) untilMounted(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.mounted.Load() || ownRoute(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Retry-After", "1")
		if procedurePath(r.URL.Path) && rpcErrors.IsSupported(r) {
			_ = rpcErrors.Write(w, r, notReady())
			return
		}
		http.Error(w, "not ready: recovering, retry", http.StatusServiceUnavailable)
	})
}

// rpcErrors writes an error in the protocol of the request (Connect unary or streaming,
// gRPC, gRPC-Web), as the native API's own handlers would.
var rpcErrors = connect.NewErrorWriter()

// reasonNotReady is common.proto's ErrorInfo reason for a broker that is still recovering.
// The server may not import internal/api (deps_test.go), which names the reasons; the
// string is part of the API's contract and never changes.
const reasonNotReady = "NOT_READY"

// notReady is the native API's answer during recovery: unavailable (HTTP 503 in Connect's
// unary protocol), with an ErrorInfo whose reason is NOT_READY, as internal/api builds
// its errors.
func notReady() *connect.Error {
	err := connect.NewError(connect.CodeUnavailable, errors.New("the broker is recovering; retry"))
	if d, derr := connect.NewErrorDetail(&sluicev1.ErrorInfo{Reason: reasonNotReady}); derr == nil {
		err.AddDetail(d)
	}
	return err
}

// procedurePath reports whether path has the shape of an RPC procedure,
// /package.Service/Method (the native API's are /sluice.v1.QueueService/Send and the
// like), unlike the admin endpoints (/v1/admin/...) and the console, which are plain HTTP.
func procedurePath(path string) bool {
	service, method, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	return ok && strings.Contains(service, ".") && method != "" && !strings.Contains(method, "/")
}

// ownRoute: the server's own endpoints, served on the API's mux when metrics have no
// listener of their own.
func ownRoute(path string) bool {
	return path == "/healthz" || path == "/readyz" || path == "/metrics"
}

// timeBodies bounds only how long request bodies take to arrive, for a
// handler that guards the rest itself (the SQS handler limits sizes and
// recovers panics in SQS's own error format).
func (s *Server) timeBodies(next http.Handler) http.Handler {
	g := bodyGuard{timeout: s.cfg.ReadBodyTimeout, refuse: func(*http.Request, int) {}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r2, _ := g.apply(w, w, r)
		next.ServeHTTP(w, r2)
	})
}

// isFrontendRoute reports whether r is for a handler a front-end mounted
// with RegisterHTTP, rather than the server's own or no handler at all.
func (s *Server) isFrontendRoute(r *http.Request) bool {
	_, pattern := s.mux.Handler(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.routes[pattern]
}

// isStreamRoute reports whether r is for a route mounted with
// RegisterStreamHTTP.
func (s *Server) isStreamRoute(r *http.Request) bool {
	_, pattern := s.mux.Handler(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streamPats[pattern]
}

// recoverPanic turns a handler panic into a logged error and a 500, so a bug
// in one handler costs one request, not the process (net/http's own recovery
// would drop the connection without an answer and without our logger).
func (s *Server) recoverPanic(w *trackingWriter, r *http.Request) {
	v := recover()
	if v == nil {
		return
	}
	if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
		panic(v) // the documented way for a handler to abort a response; let net/http handle it
	}
	s.log.Error("handler panicked", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
	if !w.wroteHeader {
		http.Error(w, "internal error", http.StatusInternalServerError)
	}
}

// trackingWriter remembers whether the status line went out, so a panic
// after a partial answer does not try to write a second header. It forwards
// Flush, Hijack and Unwrap because streaming RPCs need them.
//
// It also carries a refusal: once the body guard found the body over the
// limit (413) or too slow (408), an error answer from the handler goes out
// with that status, whatever error code the handler's protocol chose, so
// every path refuses the same way. A success status (gRPC answers 200 and
// carries its error in trailers) is left alone.
type trackingWriter struct {
	http.ResponseWriter
	wroteHeader bool
	refusal     atomic.Int32
}

func (w *trackingWriter) WriteHeader(code int) {
	w.wroteHeader = true
	if r := int(w.refusal.Load()); r != 0 && code >= 400 {
		code = r
	}
	w.ResponseWriter.WriteHeader(code)
}

// refuse records why r's body was refused and asks for the connection to
// close after the answer.
func (w *trackingWriter) refuse(r *http.Request, code int) {
	w.refusal.CompareAndSwap(0, int32(code))
	if !w.wroteHeader {
		closeAfter(w, r)
	}
}

func (w *trackingWriter) Write(b []byte) (int, error) {
	w.wroteHeader = true
	return w.ResponseWriter.Write(b)
}

func (w *trackingWriter) Flush() {
	w.wroteHeader = true
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *trackingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// Unwrap lets http.ResponseController reach the connection's own writer
// (deadlines, full duplex for bidirectional HTTP/1 streams).
func (w *trackingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
