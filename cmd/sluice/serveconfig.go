package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/sluice-mq/sluice/internal/server"
)

// serveSetting is one serve flag: its name is also its YAML key and, upper-
// cased with "_" for "-" behind "SLUICE_", its environment variable. Every
// setting travels as text until set parses it, so the three sources share
// one parser and one error message.
type serveSetting struct {
	name  string
	usage string // a `word` in backquotes names the value in --help
	get   func(*server.Config) string
	set   func(*server.Config, string) error
}

func str(p func(*server.Config) *string) (func(*server.Config) string, func(*server.Config, string) error) {
	return func(c *server.Config) string { return *p(c) },
		func(c *server.Config, v string) error { *p(c) = v; return nil }
}

func setting(name, usage string, p func(*server.Config) *string) serveSetting {
	get, set := str(p)
	return serveSetting{name, usage, get, set}
}

var serveSettings = []serveSetting{
	setting("data-dir", "`directory` for logs, journals and metadata; created if missing", func(c *server.Config) *string { return &c.DataDir }),
	setting("http-addr", "`host:port` for the native API, and /metrics, /healthz and /readyz unless --metrics-addr is set", func(c *server.Config) *string { return &c.HTTPAddr }),
	setting("kafka-addr", "`host:port` for the Kafka protocol (\"\" disables)", func(c *server.Config) *string { return &c.KafkaAddr }),
	setting("sqs-addr", "`host:port` for the SQS API (\"\" disables)", func(c *server.Config) *string { return &c.SQSAddr }),
	setting("http-advertised-addr", "`host:port` clients are told for the HTTP listener (default: the bound address)", func(c *server.Config) *string { return &c.HTTPAdvertisedAddr }),
	setting("kafka-advertised-addr", "`host:port` Kafka clients are told in metadata (default: the bound address)", func(c *server.Config) *string { return &c.KafkaAdvertisedAddr }),
	setting("sqs-advertised-addr", "`host:port` used in SQS queue URLs (default: the request's Host)", func(c *server.Config) *string { return &c.SQSAdvertisedAddr }),
	setting("auth-file", "users `file` (YAML) every protocol authenticates against and whose ACLs it enforces; reread on change and on SIGHUP (docs/security.md; \"\": no authentication)", func(c *server.Config) *string { return &c.AuthFile }),
	// TLS and safe defaults: docs/security.md.
	setting("http-tls-addr", "`host:port` for the native API over TLS (HTTPS, HTTP/2 by ALPN; \"\" disables)", func(c *server.Config) *string { return &c.HTTPTLSAddr }),
	setting("kafka-tls-addr", "`host:port` for the Kafka protocol over TLS (\"\" disables)", func(c *server.Config) *string { return &c.KafkaTLSAddr }),
	setting("sqs-tls-addr", "`host:port` for the SQS API over HTTPS (\"\" disables)", func(c *server.Config) *string { return &c.SQSTLSAddr }),
	setting("http-tls-advertised-addr", "`host:port` the native TLS listener is reached at, as sluice cluster status shows it (default: the bound address)", func(c *server.Config) *string { return &c.HTTPTLSAdvertisedAddr }),
	setting("kafka-tls-advertised-addr", "`host:port` Kafka clients on the TLS listener are told in metadata (default: the bound address)", func(c *server.Config) *string { return &c.KafkaTLSAdvertisedAddr }),
	setting("sqs-tls-advertised-addr", "`host:port` used in the https:// queue URLs of the SQS TLS listener (default: the request's Host)", func(c *server.Config) *string { return &c.SQSTLSAdvertisedAddr }),
	setting("tls-cert", "PEM certificate chain `file` (leaf first) of every TLS listener; reloaded on SIGHUP or change", func(c *server.Config) *string { return &c.TLSCertFile }),
	setting("tls-key", "PEM private key `file` of --tls-cert", func(c *server.Config) *string { return &c.TLSKeyFile }),
	setting("tls-client-ca", "PEM `file` of the CAs client certificates must chain to (mutual TLS, optional: clients without one still connect); the CN is the principal", func(c *server.Config) *string { return &c.TLSClientCAFile }),
	durationSetting("tls-reload-interval", "how often the TLS files are checked for changes (a `duration`)",
		func(c *server.Config) *time.Duration { return &c.TLSReloadInterval }),
	setting("metrics-addr", "`host:port` for /metrics, /healthz and /readyz alone; when set they leave the --http-addr listener", func(c *server.Config) *string { return &c.MetricsAddr }),
	{
		name:  "insecure-allow-anonymous",
		usage: "`bool`: without --auth-file, let listeners bind beyond loopback anyway: anyone who can reach them can do anything (logged at every start)",
		get:   func(c *server.Config) string { return strconv.FormatBool(c.InsecureAllowAnonymous) },
		set: func(c *server.Config, v string) (err error) {
			c.InsecureAllowAnonymous, err = strconv.ParseBool(v)
			return err
		},
	},
	setting("fsync", "`policy` for syncing writes before acknowledging them: always, a duration such as 10ms, or never", func(c *server.Config) *string { return &c.Fsync }),
	setting("log-level", "log `level`: debug, info, warn or error", func(c *server.Config) *string { return &c.LogLevel }),
	setting("log-format", "log `format`: text (for people) or json (for log pipelines)", func(c *server.Config) *string { return &c.LogFormat }),
	{
		name:  "max-request-bytes",
		usage: "largest request body accepted, in `bytes` (suffixes KiB, MiB, GiB allowed)",
		get:   func(c *server.Config) string { return formatBytes(c.MaxRequestBytes) },
		set: func(c *server.Config, v string) (err error) {
			c.MaxRequestBytes, err = parseBytes(v)
			return err
		},
	},
	{
		name:  "preallocate",
		usage: "zero-fill each log this many `bytes` ahead of its appends, so a sync flushes data only (0 disables)",
		get:   func(c *server.Config) string { return formatBytes(c.PreallocateBytes) },
		set: func(c *server.Config, v string) (err error) {
			if strings.TrimSpace(v) == "0" {
				c.PreallocateBytes = 0
				return nil
			}
			c.PreallocateBytes, err = parseBytes(v)
			return err
		},
	},
	{
		name: "disk-headroom",
		usage: "keep this many `bytes` free in the data directory for acks and deletes once the disk is full; sends are refused meanwhile " +
			"(0 disables; at most 1/8 of the disk, lowered with a warning on a smaller one)",
		get: func(c *server.Config) string { return formatBytes(c.DiskHeadroomBytes) },
		set: func(c *server.Config, v string) (err error) {
			if strings.TrimSpace(v) == "0" {
				c.DiskHeadroomBytes = 0
				return nil
			}
			c.DiskHeadroomBytes, err = parseBytes(v)
			return err
		},
	},
	{
		name:  "compaction-buffer",
		usage: "memory of one pass of the log cleaner of compacted topics, in `bytes` (24 a key; more keys than fit take more passes; 0: 32 MiB)",
		get:   func(c *server.Config) string { return formatBytes(c.CompactionBufferBytes) },
		set: func(c *server.Config, v string) (err error) {
			if strings.TrimSpace(v) == "0" {
				c.CompactionBufferBytes = 0
				return nil
			}
			c.CompactionBufferBytes, err = parseBytes(v)
			return err
		},
	},
	{
		name:  "compaction-rate",
		usage: "bound on the log cleaner's reads plus writes, in `bytes` per second (0: no limit)",
		get:   func(c *server.Config) string { return formatBytes(c.CompactionBytesPerSec) },
		set: func(c *server.Config, v string) (err error) {
			if strings.TrimSpace(v) == "0" {
				c.CompactionBytesPerSec = 0
				return nil
			}
			c.CompactionBytesPerSec, err = parseBytes(v)
			return err
		},
	},
	durationSetting("compaction-interval", "how often the log cleaner looks for compacted partitions to clean (a `duration`; 0: 15s)",
		func(c *server.Config) *time.Duration { return &c.CompactionInterval }),
	{
		name:  "segment-bytes",
		usage: "segment size of topic and queue logs, in `bytes`; only sealed segments are compacted or deleted by retention (0: 128MiB; at most 2GiB-1)",
		get:   func(c *server.Config) string { return formatBytes(c.SegmentBytes) },
		set: func(c *server.Config, v string) (err error) {
			if strings.TrimSpace(v) == "0" {
				c.SegmentBytes = 0
				return nil
			}
			if c.SegmentBytes, err = parseBytes(v); err == nil && (c.SegmentBytes < 4096 || c.SegmentBytes > 1<<31-1) {
				err = fmt.Errorf("want 4KiB to 2GiB-1, got %d", c.SegmentBytes)
			}
			return err
		},
	},
	countSetting("snapshot-every", "journal `events` between a queue's (or subscription's, or the groups') snapshots; fewer replay faster at start (0: 100000)",
		func(c *server.Config) *int { return &c.SnapshotEvery }),
	{
		name:  "kafka-auto-create-topics",
		usage: "`bool`: a Kafka client's metadata request creates the topics it names (Kafka's auto.create.topics.enable)",
		get:   func(c *server.Config) string { return strconv.FormatBool(c.KafkaAutoCreateTopics) },
		set: func(c *server.Config, v string) (err error) {
			c.KafkaAutoCreateTopics, err = strconv.ParseBool(v)
			return err
		},
	},
	{
		name:  "kafka-default-partitions",
		usage: "partition `count` of topics created without one (Kafka's num.partitions)",
		get:   func(c *server.Config) string { return strconv.Itoa(int(c.KafkaDefaultPartitions)) },
		set: func(c *server.Config, v string) error {
			n, err := strconv.ParseInt(v, 10, 32)
			c.KafkaDefaultPartitions = int32(n)
			return err
		},
	},
	// KIP-848 consumer groups: docs/kafka.md, "KIP-848 consumer groups".
	durationSetting("group-consumer-session-timeout", "a KIP-848 consumer-group member that sends no heartbeat this long is removed (a `duration`; Kafka's group.consumer.session.timeout.ms)",
		func(c *server.Config) *time.Duration { return &c.ConsumerGroupSessionTimeout }),
	durationSetting("group-consumer-heartbeat-interval", "how often KIP-848 consumer-group members heartbeat (a `duration`; Kafka's group.consumer.heartbeat.interval.ms)",
		func(c *server.Config) *time.Duration { return &c.ConsumerGroupHeartbeatInterval }),
	setting("group-consumer-assignors", "server-side `assignors` of KIP-848 consumer groups, comma-separated, the first the default: uniform, range (Kafka's group.consumer.assignors)",
		func(c *server.Config) *string { return &c.ConsumerGroupAssignors }),

	// A cluster: docs/cluster.md, "Operating a cluster".
	{
		name:  "node-id",
		usage: "this node's `id` in a cluster (1 or more; 0: a single node, the default)",
		get:   func(c *server.Config) string { return strconv.FormatUint(c.NodeID, 10) },
		set: func(c *server.Config, v string) (err error) {
			c.NodeID, err = strconv.ParseUint(v, 10, 64)
			return err
		},
	},
	setting("cluster-addr", "`host:port` this node's Raft transport listens on (with --node-id)", func(c *server.Config) *string { return &c.ClusterAddr }),
	setting("cluster-peers", "every node of the cluster, this one included, as `id=host:port,...` (their --cluster-addr)", func(c *server.Config) *string { return &c.ClusterPeers }),
	setting("cluster-tls-cert", "PEM certificate `file` of this node for the Raft transport's mutual TLS (subject CN node-<id>); reloaded on SIGHUP or change", func(c *server.Config) *string { return &c.ClusterTLSCert }),
	setting("cluster-tls-key", "PEM private key `file` of --cluster-tls-cert", func(c *server.Config) *string { return &c.ClusterTLSKey }),
	setting("cluster-tls-ca", "PEM `file` of the cluster CA: every peer's certificate must chain to it", func(c *server.Config) *string { return &c.ClusterTLSCA }),
	{
		name: "cluster-join",
		usage: "`bool`: start empty and join the running cluster --cluster-peers names (its members), once a member admits this node " +
			"with \"sluice cluster add-node ID=HOST:PORT\", instead of bootstrapping a new cluster; ignored once the node has Raft state",
		get: func(c *server.Config) string { return strconv.FormatBool(c.ClusterJoin) },
		set: func(c *server.Config, v string) (err error) {
			c.ClusterJoin, err = strconv.ParseBool(v)
			return err
		},
	},
	countSetting("cluster-max-feature-level", "the newest feature `level` this node lets the cluster use (0: all this binary reads); the cluster's level rises only "+
		"when every node reads it, and never falls: hold it on one node during a rolling upgrade you may roll back (docs/cluster.md, \"Upgrades\")",
		func(c *server.Config) *int { return &c.ClusterMaxFeatureLevel }),
	setting("cluster-id", "the cluster's `id`, told to Kafka clients and checked in every node-to-node handshake "+
		"(default: a single node's derived from its data directory, stable across restarts; a cluster's \"sluice\": give every node the same)",
		func(c *server.Config) *string { return &c.ClusterID }),
	durationSetting("cluster-tick", "the Raft tick (a `duration`): a leader's loss is noticed in about 10 to 20 ticks",
		func(c *server.Config) *time.Duration { return &c.ClusterTick }),
	countSetting("cluster-snapshot-entries", "a Raft group snapshots its state and compacts its log after this many applied `entries` (etcd's --snapshot-count; "+
		"0: 10000); a partition also after 8 MiB, a queue paced by its backlog (docs/cluster.md, \"Snapshot, compaction and seeding a replica\")",
		func(c *server.Config) *int { return &c.ClusterSnapshotEntries }),
	durationSetting("cluster-leader-balance", "how often a node hands the partitions and queues it leads back to their preferred leaders (a `duration`; "+
		"Kafka's leader.imbalance.check.interval.seconds; 0: never, as auto.leader.rebalance.enable=false: Kafka's ElectLeaders, kafka-leader-election.sh, does it on request)",
		func(c *server.Config) *time.Duration { return &c.ClusterLeaderBalance }),
	durationSetting("transaction-max-timeout", "the longest transaction.timeout.ms a Kafka transactional producer may ask (a `duration`; Kafka's transaction.max.timeout.ms; 0: 15m)",
		func(c *server.Config) *time.Duration { return &c.TransactionMaxTimeout }),
	durationSetting("producer-id-expiration", "how long a partition remembers an idempotent producer that writes nothing to it (a `duration`; "+
		"Kafka's producer.id.expiration.ms; 0: 24h; negative: forever)",
		func(c *server.Config) *time.Duration { return &c.ProducerIDExpiration }),
	durationSetting("shutdown-timeout", "how long in-flight requests may take to finish at shutdown (a `duration`); "+
		"a cluster node first hands its leaderships to other replicas, within as long again",
		func(c *server.Config) *time.Duration { return &c.ShutdownTimeout }),

	// Connections: docs/operations.md, "Connections".
	durationSetting("read-header-timeout", "longest an HTTP request's headers may take to arrive, native and SQS listeners (a `duration`)",
		func(c *server.Config) *time.Duration { return &c.ReadHeaderTimeout }),
	durationSetting("read-body-timeout", "longest an HTTP request's body may take to arrive after its headers; a long poll's wait is not counted (a `duration`)",
		func(c *server.Config) *time.Duration { return &c.ReadBodyTimeout }),
	durationSetting("http-idle-timeout", "close a keep-alive HTTP connection idle this long (a `duration`)",
		func(c *server.Config) *time.Duration { return &c.HTTPIdleTimeout }),
	durationSetting("kafka-connections-max-idle", "close a Kafka connection that sends no request this long (a `duration`; Kafka's connections.max.idle.ms)",
		func(c *server.Config) *time.Duration { return &c.KafkaMaxIdle }),
	durationSetting("kafka-sasl-session-lifetime", "a Kafka SASL login holds this long, then the client re-authenticates or is disconnected (a `duration`; KIP-368, Kafka's connections.max.reauth.ms; 0: no limit)",
		func(c *server.Config) *time.Duration { return &c.KafkaSessionLifetime }),
	maxConnSetting("http-max-connections", "native API", func(c *server.Config) *int { return &c.HTTPMaxConnections }),
	maxConnSetting("kafka-max-connections", "Kafka", func(c *server.Config) *int { return &c.KafkaMaxConnections }),
	maxConnSetting("sqs-max-connections", "SQS", func(c *server.Config) *int { return &c.SQSMaxConnections }),

	// Tracing: docs/operations.md, "Monitoring: tracing".
	setting("otlp-endpoint", "send OpenTelemetry spans over OTLP/HTTP to this collector (`host:port` or an http(s):// URL; empty: tracing off, at no cost)",
		func(c *server.Config) *string { return &c.OTLPEndpoint }),
	{
		name:  "trace-sample-ratio",
		usage: "share (a `ratio`, 0 to 1) of the traces sluice starts itself that are sampled; a request or message that brings a trace context keeps its own decision (parent-based)",
		get:   func(c *server.Config) string { return strconv.FormatFloat(c.TraceSampleRatio, 'g', -1, 64) },
		set: func(c *server.Config, v string) (err error) {
			c.TraceSampleRatio, err = strconv.ParseFloat(v, 64)
			return err
		},
	},

	// The transactional outbox: docs/outbox.md.
	setting("outbox-config", "outbox relay config `files` (comma-separated) to run beside the broker, each a client of its native API (docs/outbox.md)", func(c *server.Config) *string { return &c.OutboxConfigs }),
}

func durationSetting(name, usage string, p func(*server.Config) *time.Duration) serveSetting {
	return serveSetting{name, usage,
		func(c *server.Config) string { return p(c).String() },
		func(c *server.Config, v string) (err error) {
			*p(c), err = time.ParseDuration(v)
			return err
		}}
}

// countSetting is a number that is 0 (the default, named in usage) or more.
func countSetting(name, usage string, p func(*server.Config) *int) serveSetting {
	return serveSetting{name, usage,
		func(c *server.Config) string { return strconv.Itoa(*p(c)) },
		func(c *server.Config, v string) error {
			n, err := strconv.Atoi(v)
			if err == nil && n < 0 {
				err = fmt.Errorf("want 0 or more, got %d", n)
			}
			*p(c) = n
			return err
		}}
}

// maxConnSetting is a listener's connection cap: "auto" (0 in the
// Config, a quarter of the open-file limit) or a positive count.
func maxConnSetting(name, listener string, p func(*server.Config) *int) serveSetting {
	usage := fmt.Sprintf("most connections open at once on the %s listener, more are refused: a `count`, "+
		"or auto for a quarter of the open-file limit (%d here)", listener, server.AutoMaxConnections())
	return serveSetting{name, usage,
		func(c *server.Config) string {
			if *p(c) == 0 {
				return "auto"
			}
			return strconv.Itoa(*p(c))
		},
		func(c *server.Config, v string) error {
			if strings.TrimSpace(v) == "auto" {
				*p(c) = 0
				return nil
			}
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n <= 0 {
				return fmt.Errorf("want auto or a positive count, got %q", v)
			}
			*p(c) = n
			return nil
		}}
}

const configFlag = "config"

func envName(flag string) string {
	return "SLUICE_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

func addServeFlags(fs *pflag.FlagSet) {
	def := server.Defaults()
	for _, s := range serveSettings {
		fs.String(s.name, s.get(&def), fmt.Sprintf("%s [env %s]", s.usage, envName(s.name)))
		if strings.HasPrefix(s.usage, "`bool`") {
			fs.Lookup(s.name).NoOptDefVal = "true" // --insecure-allow-anonymous alone means true
		}
	}
	fs.String(configFlag, "", fmt.Sprintf("YAML `file` whose keys are these flag names [env %s]", envName(configFlag)))
	fs.SortFlags = false // keep the order above: most used first
}

// resolveServeConfig applies defaults, then the config file, then the
// environment, then the flags given on the command line, and validates the
// result. Every error is one line naming the setting and where it came from.
func resolveServeConfig(fs *pflag.FlagSet, lookupEnv func(string) (string, bool)) (server.Config, error) {
	cfg := server.Defaults()
	path, _ := lookupEnv(envName(configFlag))
	if fs.Changed(configFlag) {
		path, _ = fs.GetString(configFlag)
	}
	from := map[string]string{} // where each setting given came from, the last one winning
	if path != "" {
		file, err := readConfigFile(path)
		if err != nil {
			return cfg, err
		}
		if err := applyAll(&cfg, from, "config file "+path, func(name string) (string, bool) { v, ok := file[name]; return v, ok }); err != nil {
			return cfg, err
		}
	}
	if err := applyAll(&cfg, from, "", func(name string) (string, bool) { return lookupEnv(envName(name)) }); err != nil {
		return cfg, err
	}
	if err := applyAll(&cfg, from, "command line", func(name string) (string, bool) {
		if !fs.Changed(name) {
			return "", false
		}
		v, err := fs.GetString(name)
		return v, err == nil
	}); err != nil {
		return cfg, err
	}
	return cfg, withOrigin(cfg.Validate(), from)
}

// applyAll sets every setting that lookup has, noting in from where it came from. origin
// "" means the environment, whose variable name is the clearest origin to report.
func applyAll(cfg *server.Config, from map[string]string, origin string, lookup func(name string) (string, bool)) error {
	for _, s := range serveSettings {
		v, ok := lookup(s.name)
		if !ok {
			continue
		}
		o := origin
		if o == "" {
			o = envName(s.name)
		}
		from[s.name] = o
		if err := s.set(cfg, v); err != nil {
			return fmt.Errorf("--%s (from %s): %w", s.name, o, err)
		}
	}
	return nil
}

// withOrigin adds to a validation error that begins with a setting's flag ("--fsync: ...")
// where that setting came from, unless the command line: an operator who set
// SLUICE_FSYNC in a unit file looks for that, not for a flag they never typed.
func withOrigin(err error, from map[string]string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	name, rest, ok := strings.Cut(strings.TrimPrefix(msg, "--"), ":")
	if !ok || !strings.HasPrefix(msg, "--") || from[name] == "" || from[name] == "command line" {
		return err
	}
	return fmt.Errorf("--%s (from %s):%s", name, from[name], rest)
}

// readConfigFile reads a flat YAML mapping of flag names to scalars. Unknown
// keys are errors: a typo in a config file should not silently do nothing.
func readConfigFile(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	var doc map[string]yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(b)).Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config file %s: %s", path, oneLine(err))
	}
	known := map[string]bool{}
	for _, s := range serveSettings {
		known[s.name] = true
	}
	out := make(map[string]string, len(doc))
	for k, n := range doc {
		if !known[k] {
			return nil, fmt.Errorf("config file %s: unknown key %q (keys are the serve flag names, e.g. data-dir)", path, k)
		}
		if n.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("config file %s: line %d: %s must be a single value", path, n.Line, k)
		}
		out[k] = n.Value
	}
	return out, nil
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

var byteUnits = []struct {
	suffix string
	mult   int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

// parseBytes accepts a plain count or a binary-unit suffix ("16MiB").
func parseBytes(s string) (int64, error) {
	num, mult := s, int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("want a positive byte count such as 1048576 or 16MiB, got %q", s)
	}
	return n * mult, nil
}

func formatBytes(n int64) string {
	for _, u := range byteUnits {
		if n >= u.mult && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}
