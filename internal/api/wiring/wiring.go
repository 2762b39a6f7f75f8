// Package wiring assembles a running sluice node: it opens the broker in
// the server's data directory with the configured fsync policy, ties the
// broker's Close to the server's shutdown, starts maintenance, offers the
// broker's state to /metrics, and mounts the native API.
//
// `sluice serve` and sluicetest both start through Setup, so tests run the
// production wiring. This package must never translate a protocol or hold
// broker logic; it only connects parts that must not import each other.
package wiring

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/internal/api"
	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/metrics"
	"github.com/sluice-mq/sluice/internal/server"
	"github.com/sluice-mq/sluice/internal/storage"
)

// Options tune Setup; zero values take the defaults.
type Options struct {
	// MaintenanceInterval is how often retention and due-message wakeups
	// run. Default 1s.
	MaintenanceInterval time.Duration
	// Opened, when set, runs once the broker is open and the native API is
	// mounted: the place to attach more front-ends (Kafka, SQS) with
	// s.RegisterFrontend, or for a test to keep the broker.
	Opened func(s *server.Server, b *broker.Broker) error
}

// Setup returns the server.Setup that brings the broker and the native API up.
func Setup(opts Options) server.Setup {
	if opts.MaintenanceInterval <= 0 {
		opts.MaintenanceInterval = time.Second
	}
	return func(_ context.Context, s *server.Server) error {
		cfg := s.Config()
		sync, err := syncPolicy(cfg.Fsync)
		if err != nil {
			return err
		}
		prealloc := cfg.PreallocateBytes
		if prealloc <= 0 {
			prealloc = -1 // the broker's "off"; its 0 means its default
		}
		b, err := broker.Open(broker.Options{Dir: cfg.DataDir, Sync: sync, Logger: s.Logger(), StorageObserver: s.Metrics(),
			PreallocateBytes: prealloc})
		if err != nil {
			return err
		}
		// Registered first, so it runs last: after the API has drained, the
		// broker flushes and syncs everything it acknowledged.
		s.OnClose("broker", func(context.Context) error { return b.Close() })
		b.StartMaintenance(opts.MaintenanceInterval)
		if err := s.Metrics().RegisterSource(Source(b)); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
		a := api.New(api.Options{
			Broker: b, Logger: s.Logger(), MaxRequestBytes: cfg.MaxRequestBytes,
			Draining: s.Draining(), ObserveRequest: s.Metrics().ObserveRequest,
		})
		for _, r := range a.Routes() {
			s.RegisterHTTP(r.Pattern, r.Handler)
		}
		if opts.Opened != nil {
			return opts.Opened(s, b)
		}
		return nil
	}
}

// syncPolicy turns the server's --fsync setting into the storage policy.
func syncPolicy(fsync string) (storage.SyncPolicy, error) {
	p, err := server.ParseFsync(fsync)
	if err != nil {
		return storage.SyncPolicy{}, fmt.Errorf("--fsync: %w", err)
	}
	switch p.Mode {
	case server.FsyncInterval:
		return storage.SyncPolicy{Mode: storage.SyncInterval, Interval: p.Interval}, nil
	case server.FsyncNever:
		return storage.SyncPolicy{Mode: storage.SyncNever}, nil
	default:
		return storage.SyncPolicy{Mode: storage.SyncAlways}, nil
	}
}

// Source adapts the broker's stats to what /metrics reads at scrape time.
func Source(b *broker.Broker) metrics.Source {
	return metrics.SourceFuncs{Queues: queueStats(b), Groups: groupStats(b), Topics: topicStats(b)}
}

func groupStats(b *broker.Broker) func() []metrics.GroupStat {
	return func() []metrics.GroupStat {
		var out []metrics.GroupStat
		for _, g := range b.AllGroupLag() {
			for _, p := range g.Partitions {
				out = append(out, metrics.GroupStat{Group: g.Group, Topic: p.Topic, Partition: p.Partition,
					LagMessages: p.Messages, LagAge: p.Age})
			}
		}
		return out
	}
}

// topicStats reports retention headroom for topics with time retention
// (a topic kept forever has no headroom to watch).
func topicStats(b *broker.Broker) func() []metrics.TopicStat {
	return func() []metrics.TopicStat {
		var out []metrics.TopicStat
		for _, t := range b.ListTopics("") {
			h, err := b.RetentionHeadroom(t.Name)
			if err != nil || h.Unlimited {
				continue
			}
			out = append(out, metrics.TopicStat{Topic: t.Name, RetentionHeadroom: h.Headroom})
		}
		return out
	}
}

func queueStats(b *broker.Broker) func() []metrics.QueueStat {
	return func() []metrics.QueueStat {
		// A subscription is a queue cursor: it reports as the queue
		// "<topic>/<subscription>", the name QueueService reads it by.
		all := append(b.AllQueueStats(), b.AllSubscriptionStats()...)
		out := make([]metrics.QueueStat, len(all))
		for i, st := range all {
			name := st.Name
			if st.Topic != "" {
				name = st.Topic + "/" + st.Name
			}
			out[i] = metrics.QueueStat{
				Queue: name, Visible: st.Visible, InFlight: st.InFlight, Delayed: st.Delayed,
				OldestAge: st.OldestAge, DLQDepth: st.DLQDepth, Sent: st.Sent, Received: st.Received,
				Acked: st.Acked, Redelivered: st.Redelivered, DeadLettered: st.DeadLettered,
				StaleAckRefused: st.StaleRefused,
			}
		}
		return out
	}
}
