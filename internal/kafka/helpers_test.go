package kafka

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/broker"
)

// node is a broker on a temporary directory with the Kafka front-end on a
// 127.0.0.1 listener.
type node struct {
	t    testing.TB
	dir  string
	b    *broker.Broker
	s    *Server
	addr string
	done chan error
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startNode opens a broker in dir (a fresh temp dir if "") and serves
// Kafka on a free port; stopped at cleanup. The broker does not fsync:
// these tests are about the protocol, not the disk.
func startNode(t testing.TB, dir string) *node {
	return startNodeSync(t, dir, broker.SyncPolicy{Mode: broker.SyncNever})
}

func startNodeSync(t testing.TB, dir string, sync broker.SyncPolicy) *node {
	return startNodeWith(t, dir, sync, Config{})
}

// startNodeWith is startNode with a sync policy and a front-end config (its
// Logger is replaced by a quiet one).
func startNodeWith(t testing.TB, dir string, sync broker.SyncPolicy, cfg Config) *node {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	b, err := broker.Open(broker.Options{Dir: dir, Logger: quietLogger(), Sync: sync})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, dir: dir, b: b, s: New(b, withLogger(cfg)), addr: ln.Addr().String(), done: make(chan error, 1)}
	go func() { n.done <- n.s.Serve(ln) }()
	t.Cleanup(n.stop)
	return n
}

// stop shuts the front-end down, then the broker. Safe to call twice.
func (n *node) stop() {
	if n.b == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.s.Shutdown(ctx); err != nil {
		n.t.Errorf("shutdown: %v", err)
	}
	if err := <-n.done; err != ErrServerClosed {
		n.t.Errorf("Serve returned %v", err)
	}
	if err := n.b.Close(); err != nil {
		n.t.Errorf("broker close: %v", err)
	}
	n.b = nil
}

// client returns a franz-go client for the node, closed at cleanup.
func (n *node) client(opts ...kgo.Opt) *kgo.Client {
	n.t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(n.addr), kgo.MetadataMinAge(50 * time.Millisecond)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(cl.Close)
	return cl
}

func (n *node) admin() *kadm.Client { return kadm.NewClient(n.client()) }

// createTopic creates a topic through the Kafka API.
func (n *node) createTopic(name string, partitions int32) {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := n.admin().CreateTopic(ctx, partitions, 1, nil, name)
	if err != nil || resp.Err != nil {
		n.t.Fatalf("create topic %s: %v %v", name, err, resp.Err)
	}
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func withLogger(cfg Config) Config {
	cfg.Logger = quietLogger()
	return cfg
}
