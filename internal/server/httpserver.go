package server

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/sluice-mq/sluice/internal/metrics"
)

// newHTTPServer is how every HTTP listener is served: HTTP/2 beside
// HTTP/1.1 (in clear text, h2c, as gRPC clients speak it; over TLS by
// ALPN on a TLS listener, whose handshake the header timeout bounds too,
// as net/http does), the header, body and idle
// timeouts of the configuration, request contexts under the server's base
// (cancelled at the end of shutdown), idle closes counted, and, on a
// loopback listener without authentication, the Host check against DNS
// rebinding (hostguard.go), before anything else sees the request.
func (s *Server) newHTTPServer(name string, h http.Handler) *http.Server {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	if isTLS(name) {
		protocols.SetHTTP2(true)
	} else {
		protocols.SetUnencryptedHTTP2(true)
	}
	m := s.metrics.Listener(name)
	idle := s.cfg.HTTPIdleTimeout
	return &http.Server{
		Handler:           s.guardHost(name, h),
		Protocols:         &protocols,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		IdleTimeout:       idle,
		// No ReadTimeout: the body's bound is set per request by the
		// handler guard (body.go), which lifts it once the body is read,
		// so a long poll's wait is not cut off. No WriteTimeout:
		// long-poll receives and server streams legitimately hold a
		// response open; the shutdown timeout bounds them instead.
		ConnState:   func(nc net.Conn, st http.ConnState) { countIdleClose(nc, st, idle, m) },
		BaseContext: func(net.Listener) context.Context { return s.base },
		ErrorLog:    slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// countIdleClose counts a connection net/http closes after it sat idle
// for the whole idle timeout. net/http does not say why it closes a
// connection; one closed at least that long after it went idle was closed
// for it (the idle deadline is set after the connection is reported idle).
func countIdleClose(nc net.Conn, st http.ConnState, idle time.Duration, m *metrics.Listener) {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	gc, ok := nc.(*guardedConn)
	if !ok {
		return
	}
	now := time.Now().UnixNano()
	switch st {
	case http.StateIdle:
		gc.idleSince.Store(now)
	case http.StateActive:
		gc.idleSince.Store(0)
	case http.StateClosed:
		if since := gc.idleSince.Load(); since != 0 && time.Duration(now-since) >= idle {
			m.IdleClosed()
		}
	}
}

// HTTPFrontend serves h on listener name (SQS, SQSTLS) the way the native listener
// is served: the same timeouts, connection cap and accounting. h guards
// request sizes and panics itself; only the body's time bound is added.
func (s *Server) HTTPFrontend(name string, h http.Handler) Frontend {
	return &httpFrontend{srv: s.newHTTPServer(name, s.timeBodies(h))}
}

// httpFrontend runs an *http.Server as a Frontend whose Serve returns nil
// after Shutdown.
type httpFrontend struct{ srv *http.Server }

func (f *httpFrontend) Serve(ln net.Listener) error {
	if err := f.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (f *httpFrontend) Shutdown(ctx context.Context) error { return f.srv.Shutdown(ctx) }

func (f *httpFrontend) Close() error { return f.srv.Close() }

// busyBody and busyResponse are what an HTTP client gets when its
// connection is over the listener's cap.
const busyBody = "server at its connection limit; retry later\n"

var busyResponse = "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nRetry-After: 1\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\nContent-Length: " + strconv.Itoa(len(busyBody)) + "\r\n\r\n" + busyBody

// refuseHTTP answers a connection over the cap with a 503, within a
// second. It half-closes and reads what the client already sent before
// the caller closes: closing with unread data would reset the connection,
// and the client could lose the answer.
func refuseHTTP(nc net.Conn) {
	_ = nc.SetDeadline(time.Now().Add(time.Second))
	if _, err := io.WriteString(nc, busyResponse); err != nil {
		return
	}
	if cw, ok := nc.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(nc, 64<<10))
}
