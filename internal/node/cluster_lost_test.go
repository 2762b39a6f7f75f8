package node_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/node"
	"github.com/sluice-mq/sluice/internal/server"
)

// TestClusterNodeThatLostItsRaftStateSaysWhatToDo: a node that was a cluster member and
// finds its raft/ directory gone refuses to start (it would vote having forgotten its
// votes), and its error names the way back: a new node id, add-node, remove-node, and the
// section of docs/cluster.md that walks through it.
func TestClusterNodeThatLostItsRaftStateSaysWhatToDo(t *testing.T) {
	raft := freeAddrs(t, 1)[0]
	dir := t.TempDir()
	start := func() error {
		cfg := server.Defaults()
		cfg.DataDir, cfg.HTTPAddr, cfg.KafkaAddr, cfg.SQSAddr = dir, "127.0.0.1:0", "127.0.0.1:0", ""
		cfg.Fsync, cfg.NodeID, cfg.ClusterAddr, cfg.ClusterPeers = "never", 1, raft, "1="+raft
		cfg.ClusterTick = 10 * time.Millisecond
		srv, err := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), "nodetest")
		if err != nil {
			return err
		}
		ctx, cancel := context.WithCancel(context.Background())
		err = srv.Start(ctx, node.Setup(node.Options{}))
		cancel()
		_ = srv.Wait(ctx)
		return err
	}
	if err := start(); err != nil {
		t.Fatalf("first start: %v", err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "raft")); err != nil {
		t.Fatal(err)
	}
	err := start()
	if err == nil {
		t.Fatal("a member whose raft/ is gone started")
	}
	for _, want := range []string{"Raft state is gone", "--node-id", "add-node", "remove-node 1", "Replace a node that lost its disk"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
}
