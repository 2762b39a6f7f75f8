package node_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/node"
	"github.com/sluice-mq/sluice/internal/server"
)

// TestKafkaClusterID: a single node tells Kafka clients an id of its own data
// directory, in Kafka's form (22 base64url characters), the same after a restart and
// different for another directory, so a client or a UI that keys clusters by id does
// not take two brokers for one; --cluster-id overrides it, and a malformed one is
// refused before anything starts.
func TestKafkaClusterID(t *testing.T) {
	clusterID := func(dir, flag string) string {
		t.Helper()
		cfg := server.Defaults()
		cfg.DataDir, cfg.HTTPAddr, cfg.KafkaAddr, cfg.SQSAddr = dir, "127.0.0.1:0", "127.0.0.1:0", ""
		cfg.Fsync, cfg.ClusterID = "never", flag
		srv, err := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), "nodetest")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		if err := srv.Start(ctx, node.Setup(node.Options{})); err != nil {
			t.Fatal(err)
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr(server.Kafka)))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		md, err := kadm.NewClient(cl).Metadata(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cl.Close()
		cancel()
		if err := srv.Wait(ctx); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
		return md.Cluster
	}
	dir := t.TempDir()
	first := clusterID(dir, "")
	if len(first) != 22 || strings.Trim(first, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
		t.Fatalf("cluster id %q: want 22 base64url characters, as Kafka's", first)
	}
	if again := clusterID(dir, ""); again != first {
		t.Fatalf("after a restart the cluster id is %q, was %q", again, first)
	}
	if other := clusterID(t.TempDir(), ""); other == first {
		t.Fatalf("two data directories share the cluster id %q", other)
	}
	if named := clusterID(dir, "prod-eu.1"); named != "prod-eu.1" {
		t.Fatalf("--cluster-id prod-eu.1: Metadata says %q", named)
	}
	cfg := server.Defaults()
	cfg.DataDir, cfg.ClusterID = t.TempDir(), "no spaces"
	if _, err := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), "nodetest"); err == nil || !strings.Contains(err.Error(), "--cluster-id") {
		t.Fatalf("--cluster-id %q: %v, want a refusal naming the flag", cfg.ClusterID, err)
	}
}
