// Package node is sluice's composition root: the one place that knows every
// part of a running broker and connects the parts that must not import each
// other. Setup opens the broker in the server's data directory with the
// configured fsync policy and preallocation, ties the broker's Close to the
// server's shutdown, starts maintenance, offers the broker's state to
// /metrics and its fsyncs to the storage observer, and mounts the
// front-ends: the native API and the web console on the HTTP listener,
// Kafka and SQS on their own listeners (internal/server starts those only when configured).
//
// `sluice serve` (through Run) and sluicetest both start through Setup, so
// tests run the production assembly. With --node-id, Setup first assembles
// the node's side of the cluster (cluster.go, docs/cluster.md "The broker in
// a cluster"): the Raft engine over raftstore in <data>/raft, the TCP
// transport to the peers, the multiraft host and the metadata group. It then
// opens the broker over them (broker.Options.Cluster), keeps the node's
// addresses registered in the catalog, serves the calls other nodes forward
// over the transport's streams (peerstreams.go), hands the node's
// leaderships to other replicas before the listeners stop, and stops the
// host before the broker closes its logs. The front-ends are mounted as on a
// single node; where another node leads, the broker says so and the native
// API and SQS forward the call there.
//
// It owns assembly and nothing else. It must never translate a protocol,
// hold broker state or logic, or parse flags (cmd/sluice does), and only
// cmd/ and sluicetest may import it: the layers below never know how they
// are put together (deps_test.go enforces it).
package node

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/server"
	"github.com/sluice-mq/sluice/internal/sqs"
)

// Options tune Setup; zero values take the defaults.
type Options struct {
	// MaintenanceInterval is how often retention and due-message wakeups
	// run. Default 1s.
	MaintenanceInterval time.Duration
}

// Run starts a node with cfg, serves until ctx ends, and shuts down
// gracefully: what `sluice serve` does once its configuration is parsed.
func Run(ctx context.Context, cfg server.Config, log *slog.Logger, version string) error {
	return server.Run(ctx, cfg, log, version, Setup(Options{}))
}

// Setup returns the server.Setup that opens the broker and mounts every
// front-end, for server.Start or server.Run.
func Setup(opts Options) server.Setup {
	if opts.MaintenanceInterval <= 0 {
		opts.MaintenanceInterval = time.Second
	}
	return func(_ context.Context, s *server.Server) error {
		// The users file first: a mistake in it fails the start at once,
		// not after the broker's recovery.
		store, err := openAuth(s)
		if err != nil {
			return err
		}
		var cn *clusterNode
		if s.Config().Clustered() {
			if cn, err = openCluster(s); err != nil {
				return err
			}
		}
		b, err := openBroker(s, cn)
		if err != nil {
			if cn != nil {
				cn.close()
			}
			return err
		}
		// Registered first, so it runs last: after every front-end has
		// drained, the broker flushes and syncs everything it acknowledged.
		s.OnClose("broker", func(context.Context) error { return b.Close() })
		if cn != nil {
			// Runs before the broker's close: no entry is applied to a closed log.
			regCtx, stopReg := context.WithCancel(context.Background())
			s.OnClose("cluster", func(context.Context) error { stopReg(); return cn.close() })
			go cn.register(regCtx, s)
			// Before the listeners stop: the leaderships this node holds go to other
			// replicas, so its clients are sent there instead of waiting for an election
			// (docs/cluster.md, "Stopping a node").
			s.BeforeDrain("cluster leadership", func(ctx context.Context) error {
				_, err := b.HandOffLeadership(ctx)
				return err
			})
		}
		b.StartMaintenance(opts.MaintenanceInterval)
		// While the disk is full (or failing) the node says so: a load
		// balancer sends producers elsewhere; acks and deletes still work.
		s.AddReadyCheck(b.Health)
		if err := s.Metrics().RegisterSource(metricsSource(b, s.Config().DataDir, cn)); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
		tr, err := openTracer(s)
		if err != nil {
			return err
		}
		mountAPI(s, b, store, tr, dialPeer(cn, streamNativeHTTP))
		if cn != nil {
			s.ServeNodeHTTP(cn.streams.native, peerContext)
		}
		mountAdmin(s, b, store)
		if err := mountConsole(s, store != nil); err != nil {
			return err
		}
		if err := mountKafka(s, b, store, tr); err != nil {
			return err
		}
		mountSQS(s, b, store, tr, dialPeer(cn, streamSQS))
		if cn != nil {
			// Requests peers forward arrive with the base URL their client used, which
			// their answers' queue URLs name: no advertised URL of its own.
			s.ServeNodeSQS(cn.streams.sqs, sqs.NewHandler(b, sqs.Config{Logger: s.Logger(), Auth: store,
				ObserveRequest: s.Metrics().ObserveRequest, Tracer: tr}))
		}
		return nil
	}
}

// openBroker opens the broker as the server's configuration says.
func openBroker(s *server.Server, cn *clusterNode) (*broker.Broker, error) {
	cfg := s.Config()
	sync, err := syncPolicy(cfg.Fsync)
	if err != nil {
		return nil, err
	}
	prealloc := cfg.PreallocateBytes
	if prealloc <= 0 {
		prealloc = -1 // the broker's "off"; its 0 means its default
	}
	headroom := cfg.DiskHeadroomBytes
	if headroom <= 0 {
		headroom = -1 // the broker's "none"
	}
	cg, err := cfg.ConsumerGroups()
	if err != nil {
		return nil, err
	}
	o := broker.Options{Dir: cfg.DataDir, Sync: sync, Logger: s.Logger(),
		StorageObserver: s.Metrics(), PreallocateBytes: prealloc, HeadroomBytes: headroom,
		SnapshotEvery: cfg.SnapshotEvery, ConsumerGroups: cg, TransactionMaxTimeout: cfg.TransactionMaxTimeout,
		ProducerIDExpiration:  cfg.ProducerIDExpiration,
		CompactionBufferBytes: cfg.CompactionBufferBytes, CompactionBytesPerSec: cfg.CompactionBytesPerSec,
		CompactionInterval: cfg.CompactionInterval, SegmentBytes: cfg.SegmentBytes}
	if cn != nil {
		o.Cluster = cn.brokerOptions()
		o.Cluster.LeaderBalanceEvery = cfg.ClusterLeaderBalance
		if cfg.ClusterLeaderBalance <= 0 {
			o.Cluster.LeaderBalanceEvery = -1 // never
		}
	}
	return broker.Open(o)
}

// syncPolicy turns the server's --fsync setting into the broker's policy.
func syncPolicy(fsync string) (broker.SyncPolicy, error) {
	p, err := server.ParseFsync(fsync)
	if err != nil {
		return broker.SyncPolicy{}, fmt.Errorf("--fsync: %w", err)
	}
	switch p.Mode {
	case server.FsyncInterval:
		return broker.SyncPolicy{Mode: broker.SyncInterval, Interval: p.Interval}, nil
	case server.FsyncNever:
		return broker.SyncPolicy{Mode: broker.SyncNever}, nil
	default:
		return broker.SyncPolicy{Mode: broker.SyncAlways}, nil
	}
}
