package node

import (
	"fmt"

	"github.com/sluice-mq/sluice/internal/api"
	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/kafka"
	"github.com/sluice-mq/sluice/internal/peerhttp"
	"github.com/sluice-mq/sluice/internal/server"
	"github.com/sluice-mq/sluice/internal/sqs"
	"github.com/sluice-mq/sluice/internal/telemetry"
)

// mountAPI serves the native ConnectRPC API on the HTTP listeners' mux
// (plaintext and TLS), beside /healthz, /readyz and /metrics unless those
// have a listener of their own. With tr set its calls are traced
// (internal/api's trace.go). dial, in a cluster, opens a stream to a peer for the calls
// forwarded over the cluster transport (peerstreams.go).
func mountAPI(s *server.Server, b *broker.Broker, store *auth.Store, tr *telemetry.Tracer, dial peerhttp.Dial) {
	cfg := s.Config()
	a := api.New(api.Options{
		Broker: b, Logger: s.Logger(), MaxRequestBytes: cfg.MaxRequestBytes,
		Draining: s.Draining(), ObserveRequest: s.Metrics().ObserveRequest, Auth: store, Tracer: tr,
		DialPeer: dial,
	})
	for _, r := range a.Routes() {
		if r.Stream {
			s.RegisterStreamHTTP(r.Pattern, r.Handler)
			continue
		}
		s.RegisterHTTP(r.Pattern, r.Handler)
	}
}

// mountKafka attaches the Kafka front-end to the kafka listener and, when
// configured, a second instance to the kafka-tls listener. Two instances
// over one broker, because Metadata and FindCoordinator must answer each
// client with the address of the listener it came in on, as Kafka does per
// listener name: a TLS client told the plaintext port would connect there
// in clear text. A front-end holds no broker state, so nothing is split.
func mountKafka(s *server.Server, b *broker.Broker, store *auth.Store, tr *telemetry.Tracer) error {
	cfg := s.Config()
	lifetime := cfg.KafkaSessionLifetime
	if lifetime == 0 {
		lifetime = -1 // the front-end's "no end"
	}
	for _, l := range []struct{ name, addr, advertised string }{
		{server.Kafka, cfg.KafkaAddr, cfg.KafkaAdvertisedAddr},
		{server.KafkaTLS, cfg.KafkaTLSAddr, cfg.KafkaTLSAdvertisedAddr},
	} {
		host, port, err := kafka.SplitAdvertised(l.advertised)
		if err != nil {
			return fmt.Errorf("--%s-advertised-addr: %w", l.name, err)
		}
		if l.addr == "" {
			continue
		}
		s.RegisterFrontend(l.name, kafka.New(b, kafka.Config{ClusterID: kafkaClusterID(cfg, b),
			AdvertisedHost: host, AdvertisedPort: port, TLS: l.name == server.KafkaTLS, NodeID: b.NodeID(), Logger: s.Logger(), Auth: store,
			SessionLifetime:  lifetime,
			AutoCreateTopics: cfg.KafkaAutoCreateTopics, DefaultPartitions: cfg.KafkaDefaultPartitions,
			MaxIdle: cfg.KafkaMaxIdle, OnIdleClose: s.Metrics().Listener(l.name).IdleClosed,
			ObserveRequest: s.Metrics().ObserveRequest, Tracer: tr}))
	}
	return nil
}

// kafkaClusterID is the id Kafka clients are told: --cluster-id, else a cluster's
// transport name (every node tells the same), else the single node's own (a client
// that caches clusters by id must not take two single nodes for one).
func kafkaClusterID(cfg server.Config, b *broker.Broker) string {
	switch {
	case cfg.ClusterID != "":
		return cfg.ClusterID
	case cfg.Clustered():
		return clusterName
	}
	return b.DataDirID()
}

// mountSQS serves the SQS API (JSON 1.0 and query) on the sqs listener and
// its TLS twin, with the timeouts and connection cap every HTTP listener
// has (no write timeout: a ReceiveMessage long poll may wait 20 s). Each
// has its own handler only so that queue URLs name the listener asked:
// http:// or https://, and its advertised address.
// dial, in a cluster, opens a stream to a peer for the requests that came over TLS
// (peerstreams.go).
func mountSQS(s *server.Server, b *broker.Broker, store *auth.Store, tr *telemetry.Tracer, dial peerhttp.Dial) {
	cfg := s.Config()
	for _, l := range []struct{ name, addr, scheme, advertised string }{
		{server.SQS, cfg.SQSAddr, "http://", cfg.SQSAdvertisedAddr},
		{server.SQSTLS, cfg.SQSTLSAddr, "https://", cfg.SQSTLSAdvertisedAddr},
	} {
		if l.addr == "" {
			continue
		}
		url := "" // from each request's Host, and https when it came over TLS
		if l.advertised != "" {
			url = l.scheme + l.advertised
		}
		h := sqs.NewHandler(b, sqs.Config{AdvertisedURL: url, Logger: s.Logger(), Auth: store,
			ObserveRequest: s.Metrics().ObserveRequest, Tracer: tr, DialPeer: dial})
		s.RegisterFrontend(l.name, s.HTTPFrontend(l.name, h))
	}
}

// openTracer starts the OpenTelemetry tracer when --otlp-endpoint is set
// (nil otherwise: every front-end then skips tracing entirely). Its close
// is registered after the broker's, so it runs before it, once the
// front-ends have drained: the last requests' spans are sent, for at most
// the shutdown's remaining time.
func openTracer(s *server.Server) (*telemetry.Tracer, error) {
	cfg := s.Config()
	tr, err := telemetry.New(telemetry.Config{Endpoint: cfg.OTLPEndpoint, SampleRatio: cfg.TraceSampleRatio, Logger: s.Logger()})
	if err != nil {
		return nil, fmt.Errorf("--otlp-endpoint: %w", err)
	}
	if tr != nil {
		s.OnClose("tracing", tr.Shutdown)
		s.Logger().Info("tracing on", "otlp_endpoint", cfg.OTLPEndpoint, "sample_ratio", cfg.TraceSampleRatio)
	}
	return tr, nil
}
