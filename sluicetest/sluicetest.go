// Package sluicetest starts a real sluice broker inside a test: data in
// t.TempDir(), the native API on a free 127.0.0.1 port, the same assembly as
// `sluice serve` (internal/node), and everything closed by t.Cleanup.
//
//	func TestOrders(t *testing.T) {
//		c, _ := sluicetest.New(t)
//		c.CreateQueue(ctx, "orders", nil)
//		…
//	}
//
// It owns the test broker's lifecycle only; it must never be imported by
// non-test code of a program (it depends on package testing).
package sluicetest

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/node"
	"github.com/sluice-mq/sluice/internal/server"
)

// Option configures New.
type Option func(*settings)

type settings struct {
	fsync      string
	maxRequest int64
	logger     *slog.Logger
	clientOpts []client.Option
	dataDir    string
	authFile   string
	sqs        bool
}

// WithFsync sets the durability policy ("always", the default; "never" is
// faster where a test does not care about power loss).
func WithFsync(policy string) Option { return func(s *settings) { s.fsync = policy } }

// WithMaxRequestBytes bounds request bodies, as --max-request-bytes does.
func WithMaxRequestBytes(n int64) Option { return func(s *settings) { s.maxRequest = n } }

// WithLogger sends the broker's logs to l (default: discarded).
func WithLogger(l *slog.Logger) Option { return func(s *settings) { s.logger = l } }

// WithClientOptions configures the returned client (e.g. the protocol).
func WithClientOptions(opts ...client.Option) Option {
	return func(s *settings) { s.clientOpts = append(s.clientOpts, opts...) }
}

// WithDataDir keeps the data in dir instead of a fresh t.TempDir(), so a
// test can stop a broker and start another on the same data.
func WithDataDir(dir string) Option { return func(s *settings) { s.dataDir = dir } }

// WithAuthFile turns authentication on with the users file at path, as
// --auth-file does (reread every 2 s); give the client a credential with
// WithClientOptions(client.WithToken(...)).
func WithAuthFile(path string) Option { return func(s *settings) { s.authFile = path } }

// WithSQS also serves the SQS API on a free 127.0.0.1 port (Server.SQSURL).
func WithSQS() Option { return func(s *settings) { s.sqs = true } }

// Server is a broker running for one test.
type Server struct {
	// Addr is the API's host:port; URL is "http://" + Addr.
	Addr, URL string
	// SQSURL is the SQS endpoint, "http://" + its host:port (WithSQS).
	SQSURL     string
	DataDir    string
	stop       func() error
	clientOpts []client.Option
}

// Close shuts the broker down gracefully (as SIGTERM would) and returns
// its error; t.Cleanup calls it too, and later calls do nothing.
func (s *Server) Close() error { return s.stop() }

// New starts a broker and returns a client of it and its address.
func New(t testing.TB, opts ...Option) (*client.Client, string) {
	t.Helper()
	s := Start(t, opts...)
	return client.New(s.URL, s.clientOpts...), s.Addr
}

// Start starts a broker and returns it, for tests that need its URL, data
// directory or an explicit Close.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	st := settings{fsync: "always"}
	for _, o := range opts {
		o(&st)
	}
	if st.dataDir == "" {
		st.dataDir = t.TempDir()
	}
	if st.logger == nil {
		st.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg := server.Defaults()
	cfg.DataDir, cfg.HTTPAddr, cfg.KafkaAddr, cfg.SQSAddr = st.dataDir, "127.0.0.1:0", "", ""
	cfg.Fsync = st.fsync
	if st.sqs {
		cfg.SQSAddr = "127.0.0.1:0"
	}
	cfg.AuthFile = st.authFile
	if st.maxRequest > 0 {
		cfg.MaxRequestBytes = st.maxRequest
	}
	srv, err := server.New(cfg, st.logger, "sluicetest")
	if err != nil {
		t.Fatalf("sluicetest: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := srv.Start(ctx, node.Setup(node.Options{})); err != nil {
		cancel()
		t.Fatalf("sluicetest: start: %v", err)
	}
	// Wait serves until cancel; its goroutine is owned by stop, which
	// cancels it and collects its result.
	waited := make(chan error, 1)
	go func() { waited <- srv.Wait(ctx) }()
	var result error
	stopped := false
	stop := func() error {
		if !stopped {
			stopped = true
			cancel()
			result = <-waited
		}
		return result
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("sluicetest: shutdown: %v", err)
		}
	})
	addr := srv.Addr(server.HTTP)
	out := &Server{Addr: addr, URL: "http://" + addr, DataDir: st.dataDir, stop: stop, clientOpts: st.clientOpts}
	if st.sqs {
		out.SQSURL = "http://" + srv.Addr(server.SQS)
	}
	return out
}
