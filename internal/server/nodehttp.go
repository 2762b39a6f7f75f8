package server

import (
	"context"
	"errors"
	"net"
	"net/http"
)

// The HTTP "listeners" of calls other nodes of a cluster forward over the Raft transport
// (ServeNodeHTTP, ServeNodeSQS); the names label their metrics and log lines.
const (
	NodeHTTP = "cluster-http"
	NodeSQS  = "cluster-sqs"
)

// ServeNodeHTTP serves the HTTP listeners' routes (the native API) on ln, a listener the
// process feeds itself: the byte streams a cluster's peers open over the Raft transport to
// forward the calls their TLS clients made (docs/cluster.md, "Native API forwarding").
// Served as the HTTP listener is — timeouts, body guard, panic boundary, drained at
// shutdown — except for what does not apply to a peer: no connection cap (peers are few,
// and authenticated by the transport), no Host guard (no browser reaches it). connCtx
// puts what the handlers must know of a connection (which node it comes from) in the
// context of every request on it. Call it from a Setup.
func (s *Server) ServeNodeHTTP(ln net.Listener, connCtx func(context.Context, net.Conn) context.Context) {
	srv := s.newHTTPServer(NodeHTTP, s.apiHandler)
	srv.ConnContext = connCtx
	s.serveNode(NodeHTTP, ln, srv)
}

// ServeNodeSQS serves h, an SQS front-end's handler, on ln as ServeNodeHTTP serves the
// native API: the requests peers forward for their TLS clients. h guards request sizes
// and panics itself (as for HTTPFrontend).
func (s *Server) ServeNodeSQS(ln net.Listener, h http.Handler) {
	s.serveNode(NodeSQS, ln, s.newHTTPServer(NodeSQS, s.timeBodies(h)))
}

func (s *Server) serveNode(name string, ln net.Listener, srv *http.Server) {
	// The connection cap's accounting is not there (its guarded listener counts), so a
	// peer's streams are counted here: accepted, open.
	m := s.metrics.Listener(name)
	srv.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			m.Opened()
		case http.StateClosed, http.StateHijacked:
			m.Closed()
		}
	}
	s.mu.Lock()
	s.running[name] = srv
	s.mu.Unlock()
	s.log.Info("serving calls forwarded by other nodes over the cluster transport", "listener", name)
	s.serveWG.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			s.errc <- err
		}
	})
}
