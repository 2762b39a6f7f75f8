package node_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/node"
	"github.com/sluice-mq/sluice/internal/server"
)

// startNode runs node.Setup with every listener on a free 127.0.0.1 port,
// stopped (and its shutdown error checked) when the test ends.
func startNode(t *testing.T) *server.Server {
	t.Helper()
	return startNodeWith(t, nil)
}

// startNodeWith is startNode for tests and benchmarks alike, with the
// configuration changed by tweak (nil: none) before the server starts.
func startNodeWith(t testing.TB, tweak func(*server.Config)) *server.Server {
	t.Helper()
	cfg := server.Defaults()
	cfg.DataDir, cfg.HTTPAddr, cfg.KafkaAddr, cfg.SQSAddr = t.TempDir(), "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.Fsync = "never"
	if tweak != nil {
		tweak(&cfg)
	}
	srv, err := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), "nodetest")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := srv.Start(ctx, node.Setup(node.Options{})); err != nil {
		cancel()
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- srv.Wait(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-waited; err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return srv
}

// TestSetupMountsEveryFrontEnd: one Setup serves the native API, Kafka and
// SQS over one broker: a topic and a queue created through the native API
// are what Kafka's Metadata and SQS's ListQueues answer.
func TestSetupMountsEveryFrontEnd(t *testing.T) {
	srv := startNode(t)
	ctx := t.Context()
	c := client.New("http://" + srv.Addr(server.HTTP))
	if _, err := c.CreateTopic(ctx, "events", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateQueue(ctx, "jobs", nil); err != nil {
		t.Fatal(err)
	}

	kc, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr(server.Kafka)))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	topics, err := kadm.NewClient(kc).ListTopics(ctx)
	if err != nil {
		t.Fatalf("kafka metadata: %v", err)
	}
	if !topics.Has("events") {
		t.Errorf("kafka lists %v, want the topic events", topics.Names())
	}

	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+srv.Addr(server.SQS), strings.NewReader("{}"))
	req.Header.Set("X-Amz-Target", "AmazonSQS.ListQueues")
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("sqs: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "/jobs") {
		t.Errorf("sqs ListQueues: %d %s, want the queue jobs", resp.StatusCode, body)
	}
}

// TestSetupRefusesBadSettings: an advertised address clients cannot reach fails the
// start with the flag's name, before anything listens (the server's validation refuses it
// now; before, only the node did, once the HTTP listener was up).
func TestSetupRefusesBadSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*server.Config)
		want string
	}{
		{"kafka-advertised-unspecified", func(c *server.Config) { c.KafkaAdvertisedAddr = "0.0.0.0:9092" }, "--kafka-advertised-addr"},
		{"kafka-advertised-port-0", func(c *server.Config) { c.KafkaAdvertisedAddr = "kafka.example:0" }, "--kafka-advertised-addr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := server.Defaults()
			cfg.DataDir, cfg.HTTPAddr, cfg.KafkaAddr, cfg.SQSAddr = t.TempDir(), "127.0.0.1:0", "", ""
			tc.set(&cfg)
			srv, err := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), "nodetest")
			if err == nil {
				err = srv.Start(t.Context(), node.Setup(node.Options{}))
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}
