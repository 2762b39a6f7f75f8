package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/telemetry"
)

// Config configures the front-end. Zero values take the defaults listed.
type Config struct {
	// AdvertisedHost and AdvertisedPort are what Metadata and
	// FindCoordinator tell clients to connect to. Empty host or zero port:
	// taken from the listener's address, with an unspecified host
	// (0.0.0.0, ::) replaced by 127.0.0.1, because a client can never
	// connect to 0.0.0.0.
	AdvertisedHost string
	AdvertisedPort int32
	// TLS: this front-end serves a TLS listener, so a cluster's other nodes are named by
	// their TLS listeners' addresses in Metadata (03_metadata_cluster.go).
	TLS    bool
	NodeID int32 // this broker's id; default 0
	// Auth authenticates connections (SASL) and authorizes each request;
	// nil: authentication off, everything allowed.
	Auth      *auth.Store
	ClusterID string // default "sluice"
	Logger    *slog.Logger
	// MaxRequestBytes bounds a request's size prefix; a larger one closes
	// the connection. Default 100 MiB.
	MaxRequestBytes int32
	// AutoCreateTopics lets Metadata requests with allow_auto_topic_creation
	// create missing topics with DefaultPartitions partitions. Off by
	// default: a typo in a topic name should fail, not create a topic.
	AutoCreateTopics  bool
	DefaultPartitions int32 // default 1
	// MaxIdle closes a connection that sends no request for this long, as
	// Kafka's connections.max.idle.ms does; it also bounds how long one
	// response may take to be written to a client that does not read.
	// Default 10 minutes, Kafka's.
	MaxIdle time.Duration
	// OnIdleClose, when set, is called each time a connection is closed
	// for idling (the sluice_connections_idle_closed_total metric).
	OnIdleClose func()
	// SessionLifetime is how long a SASL authentication holds (KIP-368):
	// SaslAuthenticate v1+ reports it as session_lifetime_ms, the client
	// re-authenticates before it ends, and a request after the end closes
	// the connection, so a removed user or changed password takes effect
	// on open connections too. Default 1 hour; negative: no end (Kafka's
	// connections.max.reauth.ms=0).
	SessionLifetime time.Duration
	// Now is the clock of session lifetimes (tests inject one).
	Now func() time.Time
	// FailedAuthDelay holds the answer to a failed SASL login this long,
	// as Kafka's connection.failed.authentication.delay.ms does, so a
	// client retrying a wrong password cannot spin. Default 100 ms
	// (Kafka's); negative: none.
	FailedAuthDelay time.Duration
	// ObserveRequest, when set, is told how long each request took, from
	// its decoding to its response written, with protocol "kafka" and the
	// API's name (Produce, Fetch, …: only served keys reach it, so the
	// label set is fixed): the sluice_request_duration_seconds histogram.
	ObserveRequest func(protocol, operation string, d time.Duration)
	// Tracer records spans (trace.go); nil: off.
	Tracer *telemetry.Tracer
}

// Protocol is the protocol label of this front-end's request metrics.
const Protocol = "kafka"

const (
	defaultMaxRequestBytes = 100 << 20
	defaultMaxIdle         = 10 * time.Minute
)

// SplitAdvertised parses an advertised "host:port" for Config ("" gives
// zero values: taken from the listener). An unspecified host (0.0.0.0, ::)
// is refused: clients would be told to connect to it.
func SplitAdvertised(addr string) (string, int32, error) {
	if addr == "" {
		return "", 0, nil
	}
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 {
		return "", 0, fmt.Errorf("port %q: want 1 to 65535", portStr)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return "", 0, fmt.Errorf("host %q: clients cannot connect to it; give a name or address they can reach", host)
	}
	return host, int32(port), nil
}

// Server is the Kafka front-end. It satisfies server.Frontend.
type Server struct {
	b   *broker.Broker
	cfg Config
	log *slog.Logger

	// ctx is the parent of every request; cancelled at Shutdown so
	// long-polls answer at once.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex // guards lns, conns, closing and adv
	lns      map[net.Listener]struct{}
	conns    map[*conn]struct{}
	closing  bool
	adv      advertised
	connsWG  sync.WaitGroup // one per connection goroutine
	acceptWG sync.WaitGroup // one per Serve call

	ids topicIDs // topic id -> name, for Fetch v13+ and DeleteTopics v6

	// testHookHandling, when set (tests only), is called as a decoded
	// request reaches its handler, so a test knows it is in flight (and
	// which version a client chose).
	testHookHandling func(req kmsg.Request)
}

type advertised struct {
	host string
	port int32
}

// New returns a front-end over b. It listens on nothing until Serve.
func New(b *broker.Broker, cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = defaultMaxRequestBytes
	}
	if cfg.ClusterID == "" {
		cfg.ClusterID = "sluice"
	}
	if cfg.DefaultPartitions <= 0 {
		cfg.DefaultPartitions = 1
	}
	if cfg.MaxIdle <= 0 {
		cfg.MaxIdle = defaultMaxIdle
	}
	if cfg.OnIdleClose == nil {
		cfg.OnIdleClose = func() {}
	}
	if cfg.ObserveRequest == nil {
		cfg.ObserveRequest = func(string, string, time.Duration) {}
	}
	switch {
	case cfg.SessionLifetime == 0:
		cfg.SessionLifetime = defaultReauth
	case cfg.SessionLifetime < 0:
		cfg.SessionLifetime = 0
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	switch {
	case cfg.FailedAuthDelay == 0:
		cfg.FailedAuthDelay = defaultFailedAuthDelay
	case cfg.FailedAuthDelay < 0:
		cfg.FailedAuthDelay = 0
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		b: b, cfg: cfg, log: cfg.Logger.With("listener", "kafka"), ctx: ctx, cancel: cancel,
		lns: map[net.Listener]struct{}{}, conns: map[*conn]struct{}{},
		adv: advertised{host: cfg.AdvertisedHost, port: cfg.AdvertisedPort},
	}
}

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("kafka: server closed")

// Serve accepts connections on ln until Shutdown, and returns
// ErrServerClosed then.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.lns[ln] = struct{}{}
	s.acceptWG.Add(1)
	s.fillAdvertised(ln.Addr())
	s.mu.Unlock()
	defer s.acceptWG.Done()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.isClosing() {
				return ErrServerClosed
			}
			var te interface{ Temporary() bool }
			if errors.As(err, &te) && te.Temporary() {
				// Out of file descriptors and the like: back off as
				// net/http does instead of spinning or giving up.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		if !s.track(nc) {
			nc.Close()
			return ErrServerClosed
		}
	}
}

// fillAdvertised completes the advertised address from the first listener.
// Called with mu held.
func (s *Server) fillAdvertised(a net.Addr) {
	host, portStr, err := net.SplitHostPort(a.String())
	if err != nil {
		return
	}
	if s.adv.host == "" {
		if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
			// Bound to every interface: advertise this machine's name (as
			// Kafka does), never 0.0.0.0, which no client can reach.
			name, err := os.Hostname()
			if err != nil || name == "" {
				name = "127.0.0.1"
			}
			s.log.Warn("kafka listener bound to all interfaces; advertising the host name, set the advertised address to choose",
				"bound", a.String(), "advertised", name)
			host = name
		}
		s.adv.host = host
	}
	if p, err := strconv.Atoi(portStr); err == nil && s.adv.port == 0 {
		s.adv.port = int32(p)
	}
}

func (s *Server) advertisedAddr() advertised {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.adv
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// track registers a new connection and starts its goroutine; false once
// shutting down.
func (s *Server) track(nc net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	c := newConn(s, nc)
	s.conns[c] = struct{}{}
	s.connsWG.Go(func() {
		defer s.untrack(c)
		c.serve()
	})
	return true
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	c.nc.Close()
}

// Shutdown stops accepting, cancels long-polls, lets every connection
// finish the request it is handling, and closes the connections. If ctx
// ends first, the connections are closed at once (a handler blocked on a
// write then fails) and ctx's error is returned after every goroutine
// has ended.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	for ln := range s.lns {
		ln.Close()
	}
	for c := range s.conns {
		c.stopReading()
	}
	s.mu.Unlock()
	s.cancel()
	s.acceptWG.Wait()
	done := make(chan struct{})
	go func() {
		s.connsWG.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
		<-done
		return fmt.Errorf("kafka: shutdown: %w", ctx.Err())
	}
}

// Close closes every listener and connection at once.
func (s *Server) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
