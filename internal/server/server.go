// Package server owns the sluice process's network edge and lifecycle: it
// binds the listeners (native HTTP API, Kafka, SQS, each with an optional
// TLS twin, and an optional metrics listener), serves health, readiness
// and metrics, mounts the front-ends' handlers, recovers handler panics, and
// shuts down in order — not ready, the hand-offs (a cluster node's leaderships,
// BeforeDrain), stop accepting, let in-flight requests finish within a bound,
// then run the registered closers (the broker's flush-and-sync).
//
// It also enforces the safe defaults of docs/security.md: without an auth
// file no listener may bind beyond loopback (config_listeners.go), and the
// data directory is created private (secure.go). A TLS listener is its
// plaintext twin behind a handshake done before the front-end sees the
// connection (handshake.go), with the certificate internal/tlsconf loads
// and reloads.
//
// It also keeps connections from taking the process offline
// (docs/operations.md, "Connections"): every listener caps its open
// connections and survives running out of descriptors (listener.go), every
// HTTP listener bounds how long headers and bodies take and how long a
// keep-alive connection idles (httpserver.go), and request bodies are
// bounded in size without letting an over-limit body's tail be read as the
// next request (body.go).
//
// It must never contain protocol translation or broker logic: front-ends
// (internal/api, internal/kafka, internal/sqs) plug in through RegisterHTTP
// and RegisterFrontend, and the broker through Start's setup functions and
// OnClose.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/sluice-mq/sluice/internal/metrics"
	"github.com/sluice-mq/sluice/internal/tlsconf"
)

// Frontend is a protocol server on its own listener. *http.Server satisfies
// it. Serve returns once Shutdown (or Close) was called; Shutdown stops
// accepting and waits for in-flight requests until ctx ends. If Shutdown
// fails and the Frontend is also an io.Closer, Close cuts off what is left.
type Frontend interface {
	Serve(ln net.Listener) error
	Shutdown(ctx context.Context) error
}

// Setup runs after the HTTP listener is serving /healthz and before the
// server reports ready: the broker recovers its logs here, then mounts its
// handlers and front-ends and registers its Close with OnClose.
type Setup func(ctx context.Context, s *Server) error

type closer struct {
	name string
	fn   func(context.Context) error
}

// Server is one running sluice process's edge. Create it with New, configure
// it, then Start and Wait (or call Run, which does all three).
type Server struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics.Metrics
	mux     *http.ServeMux          // the native API's, served on HTTP and HTTPTLS
	https   map[string]*http.Server // the server's own HTTP listeners: HTTP, HTTPTLS, Metrics
	// apiHandler is what HTTP and HTTPTLS serve (the mux inside the edge's middleware),
	// before the Host guard: ServeNodeHTTP serves it too.
	apiHandler http.Handler
	tls        *tlsconf.Reloader // nil without --tls-cert

	ready    atomic.Bool
	mounted  atomic.Bool   // the setups finished: every front-end route is on the mux
	stopping atomic.Bool   // set when shutdown begins (before the hand-offs)
	draining chan struct{} // closed once the hand-offs are done and the listeners drain
	// base is the parent of every request context; cancelBase cuts off
	// handlers still running when the shutdown timeout ends.
	base       context.Context
	cancelBase context.CancelFunc

	mu          sync.Mutex // guards everything below
	frontends   map[string]Frontend
	listeners   map[string]net.Listener
	running     map[string]Frontend // frontends whose Serve goroutine was started
	routes      map[string]bool     // patterns mounted with RegisterHTTP
	streamPats  map[string]bool     // patterns of those whose body is a long-lived stream
	readyChecks []func() error      // see AddReadyCheck
	closers     []closer
	handOffs    []closer // see BeforeDrain
	started     bool

	serveWG sync.WaitGroup // one per Serve goroutine; Wait joins them
	errc    chan error     // a listener that failed outside shutdown

	stopOnce sync.Once // shutdown runs once, whether from Wait or a failed Start
	stopErr  error
}

// New validates cfg and returns a server that has bound nothing yet.
func New(cfg Config, log *slog.Logger, version string) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	base, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg: cfg, log: log, metrics: metrics.New(version), mux: http.NewServeMux(),
		draining: make(chan struct{}), base: base, cancelBase: cancel,
		frontends: map[string]Frontend{}, listeners: map[string]net.Listener{},
		running: map[string]Frontend{}, routes: map[string]bool{}, streamPats: map[string]bool{}, errc: make(chan error, len(listenerNames)+2), // +2: ServeNodeHTTP, ServeNodeSQS
	}
	// Health and metrics live on the API's mux unless they have a
	// listener of their own.
	ops := s.mux
	if cfg.MetricsAddr != "" {
		ops = http.NewServeMux()
	}
	ops.HandleFunc("GET /healthz", s.healthz)
	ops.HandleFunc("GET /readyz", s.readyz)
	ops.Handle("GET /metrics", s.metrics.Handler())

	api := s.wrap(s.untilMounted(s.mux), cfg.MaxRequestBytes)
	s.apiHandler = api
	s.https = map[string]*http.Server{HTTP: s.newHTTPServer(HTTP, api), HTTPTLS: s.newHTTPServer(HTTPTLS, api),
		Metrics: s.newHTTPServer(Metrics, s.wrap(ops, cfg.MaxRequestBytes))}
	if err := s.loadTLS(); err != nil {
		return nil, err
	}
	return s, nil
}

// Config returns the configuration the server was created with.
func (s *Server) Config() Config { return s.cfg }

// Logger returns the server's logger, for setups and front-ends.
func (s *Server) Logger() *slog.Logger { return s.log }

// Metrics returns the registry served on /metrics.
func (s *Server) Metrics() *metrics.Metrics { return s.metrics }

// Handler is the HTTP listeners' mux with every route mounted so far and later (the native
// API, the admin endpoints, the console), without the edge's middleware: for a caller
// inside the process, such as the console, that makes its API calls in-process.
func (s *Server) Handler() http.Handler { return s.mux }

// RegisterHTTP mounts h on the HTTP listeners' mux (net/http pattern
// syntax): plaintext and TLS serve the same routes. Safe to call while
// serving; the Connect API is mounted this way.
func (s *Server) RegisterHTTP(pattern string, h http.Handler) {
	s.mux.Handle(pattern, h)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.routes[pattern] = true
}

// RegisterStreamHTTP is RegisterHTTP for a handler whose request body is
// a long-lived stream of messages (the native API's bidirectional calls):
// the body guard's whole-body size and read-time limits would cut such a
// stream off, so h must bound each message itself (Connect's read limit)
// and what it holds unanswered.
func (s *Server) RegisterStreamHTTP(pattern string, h http.Handler) {
	s.RegisterHTTP(pattern, h)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.streamPats[pattern] = true
}

// RegisterFrontend attaches the front-end for listener name (Kafka, SQS or
// their TLS twins; a TLS twin is a front-end instance of its own, so that
// it can advertise its own address).
// Call it before Start or from a Setup; a listener with no front-end is not
// opened.
func (s *Server) RegisterFrontend(name string, f Frontend) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.frontends[name] = f
}

// OnClose registers fn to run at shutdown after every listener has drained.
// Closers run in reverse order of registration, like defers, so something
// registered later (a front-end's state) closes before what it uses (the
// broker).
func (s *Server) OnClose(name string, fn func(context.Context) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closers = append(s.closers, closer{name, fn})
}

// BeforeDrain registers fn to run when shutdown begins, after /readyz turned 503 but
// while every listener still serves: a cluster node hands the leadership of its groups to
// other replicas there, so the clients it still answers are sent to the new leaders
// instead of waiting for an election. Hand-offs run in registration order, all of them
// within one --shutdown-timeout, and an error is logged, not fatal: the stop goes on.
func (s *Server) BeforeDrain(name string, fn func(context.Context) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handOffs = append(s.handOffs, closer{name, fn})
}

// SetReady flips /readyz. Start sets it once the setups have finished;
// shutdown clears it first so load balancers stop sending.
func (s *Server) SetReady(ready bool) { s.ready.Store(ready) }

// AddReadyCheck makes /readyz answer 503 with check's error while it
// returns one (the broker's disk is full, say). A check must be cheap: it
// runs on every probe.
func (s *Server) AddReadyCheck(check func() error) {
	s.mu.Lock()
	s.readyChecks = append(s.readyChecks, check)
	s.mu.Unlock()
}

// Ready reports what /readyz answers.
func (s *Server) Ready() bool { return s.ready.Load() }

// Draining is closed when shutdown's hand-offs (BeforeDrain) are done and the
// listeners begin to drain. Long-poll and streaming handlers
// select on it to answer early (empty) instead of holding shutdown up.
func (s *Server) Draining() <-chan struct{} { return s.draining }

// Addr returns the bound address of listener name ("" if it is not open),
// which is how tests that listen on port 0 find the server.
func (s *Server) Addr(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ln, ok := s.listeners[name]; ok {
		return ln.Addr().String()
	}
	return ""
}

// AdvertisedAddr is the address clients should be told for listener name:
// the configured advertised address, else the bound one.
func (s *Server) AdvertisedAddr(name string) string {
	if a := s.cfg.advertised(name); a != "" {
		return a
	}
	return s.Addr(name)
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	io.WriteString(w, "ok\n")
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	if s.stopping.Load() {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	if !s.ready.Load() {
		http.Error(w, "not ready: recovering", http.StatusServiceUnavailable)
		return
	}
	s.mu.Lock()
	checks := s.readyChecks
	s.mu.Unlock()
	for _, check := range checks {
		if err := check(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	io.WriteString(w, "ready\n")
}

// Run starts a server, runs setups, serves until ctx is cancelled and then
// shuts down gracefully. It returns nil after a clean shutdown.
func Run(ctx context.Context, cfg Config, log *slog.Logger, version string, setups ...Setup) error {
	s, err := New(cfg, log, version)
	if err != nil {
		return err
	}
	if err := s.Start(ctx, setups...); err != nil {
		return err
	}
	return s.Wait(ctx)
}

// Start creates the data directory, binds and serves the HTTP listeners
// (so /healthz answers during recovery), starts watching the TLS
// certificate, runs setups in order, opens the listeners that have a
// front-end, and marks the server ready. On error,
// whatever was started is shut down again before Start returns.
func (s *Server) Start(ctx context.Context, setups ...Setup) error {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return errors.New("server: Start called twice")
	}
	s.started = true
	s.mu.Unlock()

	if err := s.prepareDataDir(); err != nil {
		return err
	}
	s.warnExposure()
	for _, name := range []string{Metrics, HTTP, HTTPTLS} {
		if s.cfg.listenAddr(name) == "" {
			continue
		}
		if err := s.listen(name, s.https[name]); err != nil {
			return errors.Join(err, s.shutdown())
		}
	}
	s.watchTLS()
	for _, setup := range setups {
		if err := setup(ctx, s); err != nil {
			return errors.Join(fmt.Errorf("setup: %w", err), s.shutdown())
		}
	}
	for _, name := range []string{Kafka, KafkaTLS, SQS, SQSTLS} {
		if err := s.startFrontend(name); err != nil {
			return errors.Join(err, s.shutdown())
		}
	}
	s.mounted.Store(true)
	s.SetReady(true)
	s.log.Info("ready", "data_dir", s.cfg.DataDir, "fsync", s.cfg.Fsync)
	return nil
}

func (s *Server) startFrontend(name string) error {
	addr := s.cfg.listenAddr(name)
	s.mu.Lock()
	f, ok := s.frontends[name]
	s.mu.Unlock()
	switch {
	case addr == "":
		s.log.Info("listener disabled", "listener", name)
		return nil
	case !ok:
		s.log.Info("listener not started: its front-end is not built yet", "listener", name, "addr", addr)
		return nil
	}
	return s.listen(name, f)
}

// listen binds name's address and starts f serving it on a goroutine owned
// by the server (joined in Wait). A TLS listener's handshake runs inside
// the connection cap: the guarded listener counts TCP connections, and
// handshakeListener does the handshake of each one it lets through.
func (s *Server) listen(name string, f Frontend) error {
	raw, err := net.Listen("tcp", s.cfg.listenAddr(name))
	if err != nil {
		return fmt.Errorf("--%s-addr: %w", name, err)
	}
	_, isHTTP := f.(*http.Server)
	if _, ok := f.(*httpFrontend); ok {
		isHTTP = true
	}
	var refuse func(net.Conn) // Kafka has no way to say "busy": just close
	if isHTTP && !isTLS(name) {
		refuse = refuseHTTP // a 503 in clear text means nothing to a TLS client: it is closed
	}
	maxConns := s.cfg.MaxConnections(name)
	m := s.metrics.Listener(name)
	if isTLS(name) {
		m = s.metrics.TLSListener(name)
	}
	var ln net.Listener = newGuardedListener(raw, name, int64(maxConns), refuse, m, s.log)
	if isTLS(name) {
		ln = s.tlsListener(name, ln, isHTTP, m)
	}
	s.mu.Lock()
	s.listeners[name] = ln
	s.running[name] = f
	s.mu.Unlock()
	attrs := []any{"listener", name, "addr", ln.Addr().String(), "max_connections", maxConns, "tls", isTLS(name)}
	if a := s.cfg.advertised(name); a != "" {
		// Only when set: the front-ends' defaults differ (Kafka names the host when bound
		// to every interface, SQS the request's Host), and the bound address, [::]:9092,
		// said what no client is told.
		attrs = append(attrs, "advertised", a)
	}
	s.log.Info("listening", attrs...)
	s.serveWG.Go(func() {
		err := f.Serve(ln)
		if err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			s.errc <- fmt.Errorf("%s listener: %w", name, err)
		}
	})
	return nil
}

// Wait serves until ctx is cancelled or a listener fails, then shuts down.
// It returns nil after a clean shutdown on ctx, the listener's error
// otherwise, joined with any closer's error.
func (s *Server) Wait(ctx context.Context) error {
	var cause error
	select {
	case <-ctx.Done():
		s.log.Info("shutting down", "timeout", s.cfg.ShutdownTimeout)
	case cause = <-s.errc:
		s.log.Error("listener failed; shutting down", "err", cause)
	}
	return errors.Join(cause, s.shutdown())
}
