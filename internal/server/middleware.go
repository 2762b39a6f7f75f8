package server

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"runtime/debug"
)

// wrap puts every HTTP handler behind the two guards no handler may forget:
// a request body limit and a panic boundary.
func (s *Server) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw := &trackingWriter{ResponseWriter: w}
		defer s.recoverPanic(rw, r)
		if r.Body != nil {
			r.Body = http.MaxBytesReader(rw, r.Body, s.cfg.MaxRequestBytes)
		}
		next.ServeHTTP(rw, r)
	})
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
type trackingWriter struct {
	http.ResponseWriter
	wroteHeader bool
}

func (w *trackingWriter) WriteHeader(code int) {
	w.wroteHeader = true
	w.ResponseWriter.WriteHeader(code)
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
