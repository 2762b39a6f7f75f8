package server

import (
	"context"
	"errors"
	"net"
	"net/http"
)

// NodeHTTP names the HTTP "listener" of calls other nodes of a cluster forward over the
// Raft transport (ServeNodeHTTP); it labels its metrics and log lines.
const NodeHTTP = "cluster-http"

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
	s.mu.Lock()
	s.running[NodeHTTP] = srv
	s.mu.Unlock()
	s.log.Info("serving calls forwarded by other nodes over the cluster transport", "listener", NodeHTTP)
	s.serveWG.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			s.errc <- err
		}
	})
}
