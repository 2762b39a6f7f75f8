package api

import (
	"context"
	"net/http"
	"sync"
)

// corkWriter holds back the flushes a stream's sends ask for while its
// handler writes a run of messages, and flushes once at the end. Connect
// flushes after every message it sends; a Consume stream that sends a
// receive's 30 deliveries one by one paid an HTTP/2 frame hand-off and a
// write(2) each (as many write syscalls as deliveries in the W2 profile of
// docs/benchmarks.md, issue 19). Held back, they leave in as few frames as
// the HTTP/2 writer's buffer allows. A handler that never corks sees every
// Flush passed through.
type corkWriter struct {
	http.ResponseWriter
	mu      sync.Mutex
	corked  bool
	pending bool // a Flush was held back
}

type corkKey struct{}

// withCork gives the handler a corkWriter, found with corkOf.
func withCork(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cw := &corkWriter{ResponseWriter: w}
		h.ServeHTTP(cw, r.WithContext(context.WithValue(r.Context(), corkKey{}, cw)))
	})
}

// corkOf is the request's corkWriter, nil if its route has none (then
// cork and uncork do nothing).
func corkOf(ctx context.Context) *corkWriter {
	cw, _ := ctx.Value(corkKey{}).(*corkWriter)
	return cw
}

// Flush flushes, or only notes that a flush is owed while corked.
func (c *corkWriter) Flush() {
	c.mu.Lock()
	if c.corked {
		c.pending = true
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.flush()
}

func (c *corkWriter) flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (c *corkWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// cork holds back flushes until uncork.
func (c *corkWriter) cork() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// uncork ends a cork and makes the flush it held back, so everything
// written while corked is on its way when it returns.
func (c *corkWriter) uncork() {
	if c == nil {
		return
	}
	c.mu.Lock()
	owed := c.pending
	c.corked, c.pending = false, false
	c.mu.Unlock()
	if owed {
		c.flush()
	}
}
