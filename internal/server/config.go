package server

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Config is everything the server needs to start. The zero value is not
// valid; start from Defaults.
type Config struct {
	DataDir string

	// OutboxConfigs are relay config files (comma-separated) that `sluice
	// serve` runs beside the broker, each a client of its native API
	// (docs/outbox.md). The server itself never reads them.
	OutboxConfigs string

	// Tracing (docs/operations.md, "Monitoring: tracing"): spans go over
	// OTLP/HTTP to OTLPEndpoint ("" : off, no tracer at all);
	// TraceSampleRatio is the share of traces started here (requests and
	// messages without a trace context) that are kept, 0 to 1; a context
	// that came with a request or message keeps its own decision. The
	// server only carries these to the node.
	OTLPEndpoint     string
	TraceSampleRatio float64

	// Listen addresses; "" disables that listener. A port of 0 picks a free
	// one (tests use "127.0.0.1:0" and read the result with Server.Addr).
	HTTPAddr  string
	KafkaAddr string
	SQSAddr   string

	// Advertised addresses are what clients are told to connect to (Kafka
	// metadata, queue URLs); "" means the bound address.
	HTTPAdvertisedAddr  string
	KafkaAdvertisedAddr string
	SQSAdvertisedAddr   string

	// TLS twins of the three listeners (docs/security.md, "TLS"): each
	// serves what its plaintext twin serves, with the same connection cap
	// and timeouts, over TLS with TLSCertFile and TLSKeyFile. "" disables.
	// A plaintext and a TLS listener can run side by side.
	HTTPTLSAddr  string
	KafkaTLSAddr string
	SQSTLSAddr   string

	HTTPTLSAdvertisedAddr  string
	KafkaTLSAdvertisedAddr string
	SQSTLSAdvertisedAddr   string

	// TLSCertFile and TLSKeyFile are the PEM certificate chain and key
	// every TLS listener serves; TLSClientCAFile, optional, the CAs a
	// client certificate must chain to (mutual TLS; the certificate's CN is
	// then a principal). They are reloaded on SIGHUP and checked for
	// changes every TLSReloadInterval.
	TLSCertFile       string
	TLSKeyFile        string
	TLSClientCAFile   string
	TLSReloadInterval time.Duration

	// MetricsAddr, when set, serves /metrics, /healthz and /readyz on a
	// listener of their own, and no longer on the HTTP (API) listeners.
	MetricsAddr string

	// InsecureAllowAnonymous lets listeners bind beyond loopback without
	// an AuthFile, which Validate otherwise refuses (docs/security.md,
	// "Safe defaults"); it is logged as a warning at every start.
	InsecureAllowAnonymous bool

	// Fsync is the durability policy: "always", a Go duration such as
	// "10ms" (sync at most that often), or "never". See ParseFsync.
	Fsync string

	LogLevel  string // debug, info, warn, error
	LogFormat string // text or json

	// MaxRequestBytes bounds one request body on every HTTP handler.
	MaxRequestBytes int64

	// Connections (docs/operations.md, "Connections"). The timeouts apply
	// to both HTTP listeners (native and SQS): ReadHeaderTimeout bounds a
	// request's headers, ReadBodyTimeout its body from the end of the
	// headers (a long poll's wait comes after both and is not bounded by
	// them), HTTPIdleTimeout a keep-alive connection waiting for its next
	// request. KafkaMaxIdle closes a Kafka connection that sends no request
	// for that long (Kafka's connections.max.idle.ms).
	ReadHeaderTimeout time.Duration
	ReadBodyTimeout   time.Duration
	HTTPIdleTimeout   time.Duration
	KafkaMaxIdle      time.Duration
	// KafkaSessionLifetime is how long a Kafka SASL authentication holds
	// before the client must re-authenticate (KIP-368; Kafka's
	// connections.max.reauth.ms); 0: for the connection's life.
	KafkaSessionLifetime time.Duration

	// Max*Connections cap the connections open at once on each listener;
	// one more is refused at once (HTTP: a 503 and close; Kafka: closed).
	// 0 means AutoMaxConnections, derived from the open-file limit.
	HTTPMaxConnections  int
	KafkaMaxConnections int
	SQSMaxConnections   int

	// PreallocateBytes is how far ahead of its appends each log's active
	// segment is zero-filled, so an fdatasync flushes data without a file
	// size change to journal (docs/storage.md, "Preallocation"). 0: off.
	PreallocateBytes int64

	// DiskHeadroomBytes is the space kept free in the data directory for
	// acks and deletes once the disk is full (docs/operations.md, "A full
	// disk"). 0: none.
	DiskHeadroomBytes int64

	// TransactionMaxTimeout is Kafka's transaction.max.timeout.ms: the
	// longest transaction.timeout.ms a transactional producer may ask
	// (docs/kafka.md, "Transactions"). 0: 15 minutes.
	TransactionMaxTimeout time.Duration

	// ProducerIDExpiration is Kafka's producer.id.expiration.ms: how long a
	// partition remembers an idempotent producer that writes nothing to it
	// (docs/kafka.md, "Idempotent producers"). 0: 24 hours; negative: forever.
	ProducerIDExpiration time.Duration

	// CompactionBufferBytes bounds the memory of one pass of the log cleaner
	// of compacted topics (its offset map, 24 bytes a key; 0: 32 MiB), and
	// CompactionBytesPerSec its reads plus writes (0: no limit)
	// (docs/storage.md, "Compaction").
	CompactionBufferBytes int64
	CompactionBytesPerSec int64
	// CompactionInterval is how often the cleaner looks for compacted
	// partitions to clean (0: 15 s).
	CompactionInterval time.Duration

	// SegmentBytes is the segment size of topic and queue message logs
	// (0: 128 MiB). Only sealed segments are compacted or deleted by
	// retention, so it is also their granularity.
	SegmentBytes int64

	// SnapshotEvery is how many journal events a queue, a subscription or
	// the group coordinator writes between snapshots: it bounds the replay
	// at start. 0: the broker's default (100,000).
	SnapshotEvery int

	// AuthFile is the users file (internal/auth, docs/security.md): when
	// set, every protocol authenticates its clients against it and applies
	// its access rules; it is reread on change. "": no authentication,
	// and then every listener must bind a loopback address unless
	// InsecureAllowAnonymous.
	AuthFile string

	// KafkaAutoCreateTopics lets a Kafka client's metadata request create a
	// topic it names, with KafkaDefaultPartitions partitions, as Kafka's
	// auto.create.topics.enable (default on) and num.partitions do.
	KafkaAutoCreateTopics  bool
	KafkaDefaultPartitions int32

	// KIP-848 consumer groups (docs/kafka.md, "KIP-848 consumer groups"):
	// Kafka's group.consumer.session.timeout.ms (default 45 s),
	// group.consumer.heartbeat.interval.ms (5 s) and group.consumer.assignors
	// (comma-separated, the first is the default; "uniform,range").
	ConsumerGroupSessionTimeout    time.Duration
	ConsumerGroupHeartbeatInterval time.Duration
	ConsumerGroupAssignors         string

	// ShutdownTimeout bounds how long in-flight requests may take to finish
	// once shutdown starts; after it they are cut off and closers run. The
	// hand-offs before the drain (BeforeDrain: a cluster node's leaderships)
	// get as long again, before it.
	ShutdownTimeout time.Duration

	// A cluster (docs/cluster.md, "Operating a cluster"): this node's id (0: a single
	// node, the default), the address its Raft transport listens on, every node's id and
	// transport address ("1=host:port,2=host:port,3=host:port", this node included), and
	// the Raft tick (elections take 10-20 ticks).
	NodeID       uint64
	ClusterAddr  string
	ClusterPeers string
	ClusterTick  time.Duration
	// ClusterLeaderBalance is how often a node hands the partitions and queues it leads
	// back to their preferred leaders; 0 never (Kafka's auto.leader.rebalance.enable=false),
	// then Kafka's ElectLeaders does it on request.
	ClusterLeaderBalance time.Duration
	// ClusterSnapshotEntries is how many applied entries a Raft group goes between
	// snapshots (multiraft.Config.SnapshotEntries; 0: its default, 10,000).
	ClusterSnapshotEntries int
	// Mutual TLS of the Raft transport (docs/cluster.md, "Transport security"): this
	// node's certificate (subject CN node-<id>) and key, and the cluster CA every peer's
	// certificate must chain to; all three or none. Reloaded as --tls-cert is.
	ClusterTLSCert, ClusterTLSKey, ClusterTLSCA string
	// ClusterJoin: a node with no Raft state yet starts empty, to be added to the running
	// cluster its peers name (`sluice cluster add-node`), instead of bootstrapping a new
	// one with them. Ignored once the node has state.
	ClusterJoin bool
	// ClusterMaxFeatureLevel caps the feature level this node tells the controller it
	// reads (0: all its binary reads): set on one node, it holds the cluster at that level,
	// so every node may still go back to the older binary (docs/cluster.md, "Upgrades").
	ClusterMaxFeatureLevel int
	// ClusterID names the cluster to Kafka clients (Metadata, DescribeCluster) and, on a
	// cluster node, in every node-to-node handshake (a node of another cluster is
	// refused). "": on a single node an id derived from its data directory's key, stable
	// across restarts; on a cluster node "sluice" (give every node the same one).
	ClusterID string
}

// Defaults returns the configuration `sluice serve` uses with no flags.
func Defaults() Config {
	return Config{
		DataDir:         "./sluice-data",
		HTTPAddr:        "127.0.0.1:8080",
		KafkaAddr:       "127.0.0.1:9092",
		SQSAddr:         "127.0.0.1:9324",
		Fsync:           "always",
		LogLevel:        "info",
		LogFormat:       "text",
		MaxRequestBytes: 16 << 20,
		ShutdownTimeout: 10 * time.Second,

		ReadHeaderTimeout: 10 * time.Second,
		ReadBodyTimeout:   30 * time.Second,
		HTTPIdleTimeout:   2 * time.Minute,
		KafkaMaxIdle:      10 * time.Minute,

		KafkaSessionLifetime: time.Hour,

		PreallocateBytes:  1 << 20,
		DiskHeadroomBytes: 64 << 20,

		KafkaAutoCreateTopics:  true,
		KafkaDefaultPartitions: 1,

		ConsumerGroupSessionTimeout:    45 * time.Second,
		ConsumerGroupHeartbeatInterval: 5 * time.Second,
		ConsumerGroupAssignors:         "uniform,range",

		TLSReloadInterval: 5 * time.Second,

		ClusterTick:          50 * time.Millisecond,
		ClusterLeaderBalance: 10 * time.Second,

		TraceSampleRatio: 1,
	}
}

// FsyncMode says when appended data is made durable.
type FsyncMode int

const (
	// FsyncAlways syncs before every answer (group commit batches the syncs).
	FsyncAlways FsyncMode = iota
	// FsyncInterval syncs at most every Interval; a crash may lose that much.
	FsyncInterval
	// FsyncNever leaves syncing to the OS; a machine crash may lose anything unsynced.
	FsyncNever
)

// FsyncPolicy is the parsed form of Config.Fsync.
type FsyncPolicy struct {
	Mode     FsyncMode
	Interval time.Duration // only for FsyncInterval
}

// ParseFsync parses "always", "never" or a positive Go duration.
func ParseFsync(s string) (FsyncPolicy, error) {
	switch s {
	case "always":
		return FsyncPolicy{Mode: FsyncAlways}, nil
	case "never":
		return FsyncPolicy{Mode: FsyncNever}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return FsyncPolicy{}, fmt.Errorf("want always, never or a positive duration such as 10ms, got %q", s)
	}
	return FsyncPolicy{Mode: FsyncInterval, Interval: d}, nil
}

// Validate reports the first invalid setting as a one-line error naming the
// flag, so `sluice serve` can print it as is.
func (c Config) Validate() error {
	if strings.TrimSpace(c.DataDir) == "" {
		return errors.New("--data-dir: must not be empty")
	}
	if err := c.validateListeners(); err != nil {
		return err
	}
	if _, err := ParseFsync(c.Fsync); err != nil {
		return fmt.Errorf("--fsync: %w", err)
	}
	if _, err := ParseLevel(c.LogLevel); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return fmt.Errorf("--log-format: want text or json, got %q", c.LogFormat)
	}
	if c.KafkaDefaultPartitions < 1 {
		return fmt.Errorf("--kafka-default-partitions: must be at least 1, got %d", c.KafkaDefaultPartitions)
	}
	if c.MaxRequestBytes <= 0 {
		return fmt.Errorf("--max-request-bytes: must be positive, got %d", c.MaxRequestBytes)
	}
	if c.ShutdownTimeout <= 0 {
		return fmt.Errorf("--shutdown-timeout: must be positive, got %s", c.ShutdownTimeout)
	}
	if err := c.validateCluster(); err != nil {
		return err
	}
	if _, err := c.ConsumerGroups(); err != nil {
		return err
	}
	if c.TraceSampleRatio < 0 || c.TraceSampleRatio > 1 || c.TraceSampleRatio != c.TraceSampleRatio {
		return fmt.Errorf("--trace-sample-ratio: want 0 to 1, got %v", c.TraceSampleRatio)
	}
	return c.validateConnections()
}

func (c Config) validateConnections() error {
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{
		{"--read-header-timeout", c.ReadHeaderTimeout}, {"--read-body-timeout", c.ReadBodyTimeout},
		{"--http-idle-timeout", c.HTTPIdleTimeout}, {"--kafka-connections-max-idle", c.KafkaMaxIdle},
	} {
		if d.v <= 0 {
			return fmt.Errorf("%s: must be positive, got %s", d.flag, d.v)
		}
	}
	if c.KafkaSessionLifetime < 0 {
		return fmt.Errorf("--kafka-sasl-session-lifetime: must be 0 (no limit) or positive, got %s", c.KafkaSessionLifetime)
	}
	for _, n := range []struct {
		flag string
		v    int
	}{
		{"--http-max-connections", c.HTTPMaxConnections}, {"--kafka-max-connections", c.KafkaMaxConnections},
		{"--sqs-max-connections", c.SQSMaxConnections},
	} {
		if n.v < 0 {
			return fmt.Errorf("%s: want auto or a positive count, got %d", n.flag, n.v)
		}
	}
	return nil
}

// ParseLevel parses debug, info, warn or error (slog's names, any case).
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("want debug, info, warn or error, got %q", s)
	}
	return l, nil
}
