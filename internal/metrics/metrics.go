// Package metrics owns sluice's Prometheus instrumentation: one dedicated
// registry, the histograms the serving path observes (request latency, fsync
// latency, group-commit batch size), the network edge's connection counters
// (per listener: open, accepted, refused, idle-closed, accept errors, TLS
// handshake errors), the TLS certificate's reloads and expiry (tls.go), and
// the scrape-time collector that turns the broker's per-queue, per-group and
// per-topic state into metrics.
//
// The mapping from broker state to metric names and labels lives here and
// only here: the broker satisfies the small Source interface with plain Go
// structs and never imports Prometheus. Storage reports through the
// StorageObserver interface for the same reason.
//
// This package must never hold broker state of its own, call into the broker
// outside a scrape, or register on Prometheus's global default registry (two
// brokers in one test process would collide).
package metrics

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace prefixes every sluice metric, as Prometheus naming conventions ask.
const Namespace = "sluice"

// Metrics is one broker's registry and the instruments observed on the
// serving path. It is safe for concurrent use.
type Metrics struct {
	reg          *prometheus.Registry
	requests     *prometheus.HistogramVec
	fsync        prometheus.Histogram
	commitBatch  prometheus.Histogram
	raftOnce     sync.Once // registers raftRound (RaftRounds): cluster nodes only
	raftRound    prometheus.Histogram
	authFailures *prometheus.CounterVec
	conns        connMetrics

	tlsOnce sync.Once // registers tls on first use (tls.go)
	tls     tlsMetrics
}

// New returns a Metrics with its own registry holding the Go runtime and
// process collectors, a sluice_build_info gauge for version, and the serving
// histograms.
func New(version string) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace,
			Name:      "request_duration_seconds",
			Help:      "Time to answer a request, by front-end protocol (connect, kafka, sqs) and operation.",
			// From 100µs (a cached read) to ~52s (a long poll that waited its full time).
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 20),
		}, []string{"protocol", "operation"}),
		fsync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace,
			Name:      "storage_fsync_duration_seconds",
			Help:      "Time one fdatasync of a log or journal took.",
			// fdatasync costs ~0.2 ms on a good disk and can stall for seconds on a bad one.
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 18),
		}),
		commitBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace,
			Name:      "storage_group_commit_batch_size",
			Help:      "Appends made durable by one group commit (one fdatasync).",
			Buckets:   prometheus.ExponentialBuckets(1, 2, 12),
		}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace,
			Name:      "auth_failures_total",
			Help:      "Requests refused by authentication or authorization, by protocol and reason (no_credentials, bad_credentials, unknown_user, malformed, expired, denied).",
		}, []string{"protocol", "reason"}),
		conns: newConnMetrics(),
	}
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace:   Namespace,
		Name:        "build_info",
		Help:        "Always 1; the version label says which sluice is running.",
		ConstLabels: prometheus.Labels{"version": version},
	})
	buildInfo.Set(1)
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfo, m.requests, m.fsync, m.commitBatch, m.authFailures,
	)
	m.reg.MustRegister(m.conns.collectors()...)
	return m
}

// Registry is the dedicated registry, for tests and for registering extra
// collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition formats. A
// collector error is reported in the scrape rather than failing it, so one
// broken source does not blind the whole dashboard.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorHandling:     promhttp.ContinueOnError,
		Registry:          m.reg, // counts scrape errors in promhttp_metric_handler_errors_total
		EnableOpenMetrics: true,
	})
}

// ObserveRequest records how long one request took. protocol is the
// front-end ("connect", "kafka", "sqs"); operation is the RPC, API key or
// action name — a fixed set, never user input, so label cardinality stays
// bounded.
func (m *Metrics) ObserveRequest(protocol, operation string, d time.Duration) {
	m.requests.WithLabelValues(protocol, operation).Observe(d.Seconds())
}

// AuthFailure counts one refused request. protocol and reason come from a
// fixed set (internal/auth's Reason* constants), never user input.
func (m *Metrics) AuthFailure(protocol, reason string) {
	m.authFailures.WithLabelValues(protocol, reason).Inc()
}

// ObserveFsync records one fdatasync's duration.
func (m *Metrics) ObserveFsync(d time.Duration) { m.fsync.Observe(d.Seconds()) }

// ObserveCommitBatch records how many appends one group commit made durable.
func (m *Metrics) ObserveCommitBatch(n int) { m.commitBatch.Observe(float64(n)) }

// RaftRounds registers the histogram of a cluster node's Ready rounds and returns what
// records one (multiraft.Config.ObserveRound). Only a cluster node calls it, so a single
// node shows no Raft series, as with the others (raft.go).
func (m *Metrics) RaftRounds() func(time.Duration) {
	m.raftOnce.Do(func() {
		m.raftRound = prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace,
			Name:      "raft_ready_round_duration_seconds",
			Help:      "Time one round of a cluster node's Ready loop took (persist, send and apply for every group with work). Every group of the node waits for it: rounds past the node timeout's slack (6 ticks, 0.3 s at --cluster-tick 50ms) make its peers count it down.",
			// From 100µs (a round of a few small appends) to ~6.5s.
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 17),
		})
		m.reg.MustRegister(m.raftRound)
	})
	h := m.raftRound
	return func(d time.Duration) { h.Observe(d.Seconds()) }
}

// StorageObserver is what the storage engine reports to. *Metrics satisfies
// it; storage declares its own copy of this interface (or accepts these two
// funcs) so that it depends on neither this package nor Prometheus.
type StorageObserver interface {
	ObserveFsync(d time.Duration)
	ObserveCommitBatch(n int)
}

var _ StorageObserver = (*Metrics)(nil)
