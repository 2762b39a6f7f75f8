package kafka

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/broker"
)

// conn is one client connection. Its goroutine (serve) owns every field
// but stopped and nc's read deadline, which Shutdown moves to wake a
// blocked read.
type conn struct {
	s   *Server
	nc  net.Conn
	br  *bufio.Reader
	out []byte // response buffer, reused between responses
	// clientID is the client id of the latest request, for logs.
	clientID string
	// stopped is set by stopReading, so the idle deadline, moved on every
	// request, cannot undo Shutdown's.
	stopped atomic.Bool
	// sasl is the connection's authentication (sasl.go).
	sasl saslState
	// id names the connection to the broker's share sessions, and
	// shareSessions are the ones it opened: they end with it (78_share_fetch.go).
	id            uint64
	shareSessions map[broker.ShareMember]bool
}

var connIDs atomic.Uint64

func newConn(s *Server, nc net.Conn) *conn {
	return &conn{s: s, nc: nc, br: bufio.NewReaderSize(nc, 64<<10), id: connIDs.Add(1)}
}

// stopReading makes a blocked or future read of the next request fail, so
// the connection ends after the request it is handling. The handler never
// reads from the socket, so its own work is not disturbed.
func (c *conn) stopReading() {
	c.stopped.Store(true)
	_ = c.nc.SetReadDeadline(time.Now())
}

// armRead gives the client MaxIdle from now to send its next bytes: the
// idle timeout. If Shutdown stopped reading meanwhile, its deadline is
// put back (stopped is set before Shutdown's deadline, so one of the two
// always sees the other).
func (c *conn) armRead() {
	_ = c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.MaxIdle))
	if c.stopped.Load() {
		_ = c.nc.SetReadDeadline(time.Now())
	}
}

// armWrite gives a response MaxIdle to be written: a client that stops
// reading its answers is as idle as one that stops sending requests.
func (c *conn) armWrite() {
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.MaxIdle))
}

// serve reads, handles and answers requests one at a time (produce
// requests already buffered behind one are handled with it, see
// produce_pipeline.go) until the client goes away, a frame is malformed,
// or the server shuts down.
func (c *conn) serve() {
	defer c.endShareSessions()
	for {
		c.armRead()
		frame, err := c.readFrame()
		if err != nil {
			c.logEnd(err)
			return
		}
		if err := c.serveFrame(frame); err != nil {
			c.logEnd(err)
			return
		}
	}
}

// serveFrame handles one frame read: a raw SASL token after a v0
// handshake, else a request the connection's authentication admits (with
// the produce requests buffered behind it).
func (c *conn) serveFrame(frame []byte) error {
	if c.sasl.raw {
		return c.handleRawSASL(frame)
	}
	if err := c.admit(frameKey(frame)); err != nil {
		return err
	}
	if frames := c.producePipeline(frame); len(frames) > 1 {
		return c.handleProduces(frames)
	}
	return c.handle(frame)
}

// logEnd logs why a connection ended, quietly for the ordinary reasons.
// A read that timed out outside shutdown is the idle timeout: counted, and
// logged at debug level (idle clients are normal; Kafka clients reconnect).
func (c *conn) logEnd(err error) {
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), errors.Is(err, errConnReset):
		return
	case errors.As(err, &ne) && ne.Timeout() && (c.stopped.Load() || c.s.isClosing()):
		return
	case errors.Is(err, errUnauthenticated), errors.Is(err, errSASLFailed), errors.Is(err, errSessionExpired):
		// Counted and logged, rate-limited, by the auth store.
		c.s.log.Debug("closing kafka connection", "remote", c.peer(), "client_id", c.clientID, "err", err)
		return
	case errors.Is(err, errIdle):
		c.s.cfg.OnIdleClose()
		c.s.log.Debug("closing idle kafka connection", "remote", c.nc.RemoteAddr().String(),
			"client_id", c.clientID, "max_idle", c.s.cfg.MaxIdle)
		return
	}
	c.s.log.Warn("closing kafka connection", "remote", c.nc.RemoteAddr().String(), "client_id", c.clientID, "err", err)
}

var (
	errConnReset    = errors.New("connection reset")
	errIdle         = errors.New("no request within the idle timeout")
	errHandlerPanic = errors.New("request handler panicked")
)

// readFrame reads one size-prefixed request.
func (c *conn) readFrame() ([]byte, error) {
	var sz [4]byte
	if _, err := io.ReadFull(c.br, sz[:]); err != nil {
		return nil, c.readErr(err)
	}
	n := int32(binary.BigEndian.Uint32(sz[:]))
	if n < minHeaderSize || n > c.s.cfg.MaxRequestBytes {
		return nil, fmt.Errorf("%w: request size %d, want %d to %d", errMalformed, n, minHeaderSize, c.s.cfg.MaxRequestBytes)
	}
	if int(n) > c.br.Buffered() {
		c.armRead() // the rest is still to come: bytes arriving are activity
	}
	frame, err := readN(c.br, int(n))
	if err != nil {
		return nil, c.readErr(err)
	}
	return frame, nil
}

// readErr names a failed read: a reset, the idle timeout (a deadline not
// set by Shutdown), or err itself.
func (c *conn) readErr(err error) error {
	var ne net.Error
	switch {
	case isReset(err):
		return errConnReset
	case errors.As(err, &ne) && ne.Timeout() && !c.stopped.Load():
		return fmt.Errorf("%w (%s): %w", errIdle, c.s.cfg.MaxIdle, err)
	}
	return err
}

// readN reads n bytes. Large frames grow their buffer as bytes arrive, so a
// size prefix alone cannot make the server allocate MaxRequestBytes.
func readN(r io.Reader, n int) ([]byte, error) {
	if n <= 1<<20 {
		buf := make([]byte, n)
		_, err := io.ReadFull(r, buf)
		return buf, noEOF(err)
	}
	var b bytes.Buffer
	got, err := b.ReadFrom(io.LimitReader(r, int64(n)))
	if err == nil && got < int64(n) {
		err = io.ErrUnexpectedEOF
	}
	return b.Bytes(), noEOF(err)
}

// noEOF turns a clean EOF inside a frame into ErrUnexpectedEOF: the client
// went away mid-request.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func isReset(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && !oe.Timeout() && oe.Op == "read"
}

// handle decodes one request, runs its handler and writes the response. An
// error closes the connection.
func (c *conn) handle(frame []byte) (err error) {
	h, req, derr := decodeRequest(frame)
	if h.clientID != nil {
		c.clientID = *h.clientID
	}
	switch {
	case errors.Is(derr, errUnsupportedVersion) && h.key == kmsg.ApiVersions.Int16():
		return c.writeMsg(h, false, apiVersionsUnsupported())
	case derr != nil:
		return derr
	}
	defer c.s.observe(h.key, time.Now())
	defer func() {
		if p := recover(); p != nil {
			c.s.log.Error("kafka request handler panicked", "api", kmsg.NameForKey(h.key), "version", h.version,
				"client_id", c.clientID, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("%w: %v", errHandlerPanic, p)
		}
	}()
	ctx, cancel := context.WithCancel(c.s.ctx)
	defer cancel()
	if hook := c.s.testHookHandling; hook != nil {
		hook(req)
	}
	rep, err := c.serveTraced(ctx, h.key, req)
	if err != nil {
		return err
	}
	switch {
	case rep.none:
		return nil
	case rep.fetch != nil:
		return c.writeFetch(h, rep.fetch)
	}
	if err := c.writeMsg(h, req.IsFlexible(), rep.msg); err != nil {
		return err
	}
	return rep.closeAfter
}

// observe records one request of API key since start in the request
// duration histogram.
func (s *Server) observe(key int16, start time.Time) {
	s.cfg.ObserveRequest(Protocol, kmsg.NameForKey(key), time.Since(start))
}

// writeMsg encodes a response with its header: the correlation id, and for
// flexible versions an empty tag section (header v1), except for
// ApiVersions, whose response header is always v0 so a client that does
// not yet know our versions can read it.
func (c *conn) writeMsg(h reqHeader, flexible bool, resp kmsg.Response) error {
	c.armWrite()
	buf := append(c.out[:0], 0, 0, 0, 0)
	buf = binary.BigEndian.AppendUint32(buf, uint32(h.corrID))
	if flexible && h.key != kmsg.ApiVersions.Int16() {
		buf = append(buf, 0)
	}
	buf = resp.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	_, err := c.nc.Write(buf)
	if cap(buf) <= 1<<20 {
		c.out = buf // keep small buffers; let a huge one go
	}
	return err
}
