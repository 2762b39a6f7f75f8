package server

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"runtime/debug"
	"sync/atomic"
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
func (s *Server) untilMounted(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.mounted.Load() && !ownRoute(r.URL.Path) {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "not ready: recovering, retry", http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(w, r)
	})
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
