package server

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-mq/sluice/internal/lograte"
	"github.com/sluice-mq/sluice/internal/metrics"
)

// guardedListener is every listener's edge (docs/operations.md,
// "Connections"): it caps how many connections are open at once, refuses
// the ones over the cap at once (refuse answers them first: HTTP's 503),
// survives running out of file descriptors by backing off instead of
// failing or spinning, and keeps the listener's metrics. Front-ends see
// only the connections it lets through.
type guardedListener struct {
	net.Listener
	name   string
	max    int64 // at most this many open; <= 0: no cap
	refuse func(net.Conn)
	m      *metrics.Listener
	log    *slog.Logger
	now    func() time.Time

	open      atomic.Int64
	refusing  atomic.Int64 // refuse goroutines running
	closed    chan struct{}
	closeOnce sync.Once

	logged lograte.Limiter // the refusal log's rate limit
}

// maxRefusing bounds the refusals answered at once; past it a refused
// connection is closed without an answer, so a flood cannot use the fds
// the cap saved on goodbyes.
const maxRefusing = 64

// refusalLogEvery rate-limits the log line about refused connections.
const refusalLogEvery = 10 * time.Second

func newGuardedListener(ln net.Listener, name string, max int64, refuse func(net.Conn), m *metrics.Listener, log *slog.Logger) *guardedListener {
	return &guardedListener{Listener: ln, name: name, max: max, refuse: refuse, m: m, log: log, logged: lograte.Limiter{Every: refusalLogEvery},
		now: time.Now, closed: make(chan struct{})}
}

// Accept returns the next connection under the cap. Connections over it
// are refused and never returned; an accept that fails for lack of
// resources is retried after a growing pause (5 ms to 1 s), during which
// the connections already open are served as usual.
func (l *guardedListener) Accept() (net.Conn, error) {
	var backoff time.Duration
	failures := 0
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			if !exhausted(err) {
				return nil, err
			}
			l.m.AcceptError()
			if failures++; failures == 1 {
				l.log.Warn("accept failing, backing off; open connections are still served",
					"listener", l.name, "err", err, "open", l.open.Load())
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(backoff):
			case <-l.closed: // the next Accept reports the close
			}
			continue
		}
		if failures > 0 {
			l.log.Info("accepting again", "listener", l.name, "failed_accepts", failures)
			failures, backoff = 0, 0
		}
		if n := l.open.Add(1); l.max > 0 && n > l.max {
			l.open.Add(-1)
			l.refuseConn(nc)
			continue
		}
		l.m.Opened()
		return &guardedConn{Conn: nc, l: l}, nil
	}
}

// Close stops the listener and interrupts a backoff pause.
func (l *guardedListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// exhausted reports an accept error that is the process or system running
// out of something, which passes (a connection closes, memory frees).
func exhausted(err error) bool {
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func (l *guardedListener) refuseConn(nc net.Conn) {
	l.m.Refused()
	l.logRefusal()
	if l.refuse == nil {
		nc.Close()
		return
	}
	if l.refusing.Add(1) > maxRefusing {
		l.refusing.Add(-1)
		nc.Close()
		return
	}
	go func() { // bounded by maxRefusing, and refuse by its own deadline
		defer l.refusing.Add(-1)
		defer nc.Close()
		l.refuse(nc)
	}()
}

// logRefusal logs the first refusal and then at most one line every
// refusalLogEvery, with the count since the last line.
func (l *guardedListener) logRefusal() {
	if ok, held := l.logged.Allow(l.now()); ok {
		l.log.Warn("connections refused: listener at its connection limit",
			"listener", l.name, "max_connections", l.max, "refused", held+1) // this one too
	}
}

// guardedConn gives its slot back when closed. It forwards what the
// front-ends look for on a *net.TCPConn: SyscallConn (Kafka's sendfile),
// ReadFrom (net/http's) and CloseWrite.
type guardedConn struct {
	net.Conn
	l    *guardedListener
	once sync.Once
	// idleSince is when net/http last reported the connection idle
	// (unix nanoseconds; 0: busy), to tell an idle timeout from other
	// closes.
	idleSince atomic.Int64
}

func (c *guardedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.open.Add(-1)
		c.l.m.Closed()
	})
	return err
}

var errNoSyscallConn = errors.New("connection has no file descriptor")

func (c *guardedConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errNoSyscallConn
}

func (c *guardedConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

func (c *guardedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}
