package node

import (
	"fmt"

	"github.com/sluice-mq/sluice/internal/api"
	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/kafka"
	"github.com/sluice-mq/sluice/internal/server"
	"github.com/sluice-mq/sluice/internal/sqs"
)

// mountAPI serves the native ConnectRPC API on the HTTP listener's mux,
// beside /healthz, /readyz and /metrics.
func mountAPI(s *server.Server, b *broker.Broker, store *auth.Store) {
	cfg := s.Config()
	a := api.New(api.Options{
		Broker: b, Logger: s.Logger(), MaxRequestBytes: cfg.MaxRequestBytes,
		Draining: s.Draining(), ObserveRequest: s.Metrics().ObserveRequest, Auth: store,
	})
	for _, r := range a.Routes() {
		s.RegisterHTTP(r.Pattern, r.Handler)
	}
}

// mountKafka attaches the Kafka front-end to the kafka listener.
func mountKafka(s *server.Server, b *broker.Broker, store *auth.Store) error {
	cfg := s.Config()
	host, port, err := kafka.SplitAdvertised(cfg.KafkaAdvertisedAddr)
	if err != nil {
		return fmt.Errorf("--kafka-advertised-addr: %w", err)
	}
	lifetime := cfg.KafkaSessionLifetime
	if lifetime == 0 {
		lifetime = -1 // the front-end's "no end"
	}
	s.RegisterFrontend(server.Kafka, kafka.New(b, kafka.Config{AdvertisedHost: host, AdvertisedPort: port, Logger: s.Logger(), Auth: store,
		SessionLifetime:  lifetime,
		AutoCreateTopics: cfg.KafkaAutoCreateTopics, DefaultPartitions: cfg.KafkaDefaultPartitions,
		MaxIdle: cfg.KafkaMaxIdle, OnIdleClose: s.Metrics().Listener(server.Kafka).IdleClosed}))
	return nil
}

// mountSQS serves the SQS API (JSON 1.0 and query) on the sqs listener,
// with the timeouts and connection cap every HTTP listener has (no write
// timeout: a ReceiveMessage long poll may wait 20 s).
func mountSQS(s *server.Server, b *broker.Broker, store *auth.Store) {
	url := ""
	if adv := s.Config().SQSAdvertisedAddr; adv != "" {
		url = "http://" + adv
	}
	h := sqs.NewHandler(b, sqs.Config{AdvertisedURL: url, Logger: s.Logger(), Auth: store})
	s.RegisterFrontend(server.SQS, s.HTTPFrontend(server.SQS, h))
}
