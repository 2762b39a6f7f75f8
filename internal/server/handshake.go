package server

import (
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// handshakeListener is a TLS listener that hands its front-end only
// connections whose handshake is done: each runs on its own goroutine,
// bounded by timeout (the read-header timeout), so a client that connects
// and never finishes a handshake holds its slot in the connection cap for
// seconds, not for the Kafka idle timeout, and never delays another
// client's accept. A front-end can read the peer's certificate
// (tlsconf.ConnPrincipal) as soon as it has the connection.
type handshakeListener struct {
	inner   net.Listener // the guarded listener: every connection is capped and counted
	cfg     *tls.Config
	timeout time.Duration
	name    string
	log     *slog.Logger
	failed  func() // counts a failed handshake
	// plainAnswer, on an HTTP listener, is written to a client that sent a
	// clear-text request instead of a handshake, as net/http's own TLS
	// serving does, so curl http:// says why rather than "empty reply".
	plainAnswer string

	conns     chan net.Conn
	errc      chan error // the inner Accept's final error
	done      chan struct{}
	closeOnce sync.Once
}

func newHandshakeListener(inner net.Listener, cfg *tls.Config, timeout time.Duration, name, plainAnswer string,
	log *slog.Logger, failed func()) *handshakeListener {
	l := &handshakeListener{inner: inner, cfg: cfg, timeout: timeout, name: name, plainAnswer: plainAnswer, log: log, failed: failed,
		conns: make(chan net.Conn), errc: make(chan error, 1), done: make(chan struct{})}
	go l.acceptLoop()
	return l
}

// acceptLoop ends when the inner listener fails or is closed (by Close).
func (l *handshakeListener) acceptLoop() {
	for {
		nc, err := l.inner.Accept()
		if err != nil {
			l.errc <- err
			return
		}
		go l.handshake(nc)
	}
}

func (l *handshakeListener) handshake(nc net.Conn) {
	tc := tls.Server(nc, l.cfg)
	_ = tc.SetDeadline(time.Now().Add(l.timeout))
	if err := tc.Handshake(); err != nil {
		var re tls.RecordHeaderError
		if l.plainAnswer != "" && errors.As(err, &re) && re.Conn != nil && looksLikeHTTP(re.RecordHeader) {
			_, _ = io.WriteString(re.Conn, l.plainAnswer)
		}
		l.failed()
		l.log.Debug("tls handshake failed", "listener", l.name, "remote", nc.RemoteAddr().String(), "err", err)
		nc.Close()
		return
	}
	_ = tc.SetDeadline(time.Time{})
	select {
	case l.conns <- tc:
	case <-l.done:
		tc.Close()
	}
}

// plainToTLSAnswer is what an HTTP TLS listener tells a clear-text client.
const plainToTLSAnswer = "HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n" +
	"Client sent an HTTP request to an HTTPS server.\n"

// looksLikeHTTP reports whether a TLS record header is the start of an
// HTTP/1 request line, the way net/http tells.
func looksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO", "DELET", "PATCH":
		return true
	}
	return false
}

func (l *handshakeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	case err := <-l.errc:
		l.errc <- err // every later Accept fails the same way
		return nil, err
	}
}

func (l *handshakeListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.inner.Close()
}

func (l *handshakeListener) Addr() net.Addr { return l.inner.Addr() }
