package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestKafkaAuthFile: `sluice serve --auth-file` makes Kafka clients log in
// (here franz-go with SCRAM-SHA-512), refuses a wrong password with
// SASL_AUTHENTICATION_FAILED and counts it in /metrics.
func TestKafkaAuthFile(t *testing.T) {
	users := filepath.Join(t.TempDir(), "users.yaml")
	if err := os.WriteFile(users, []byte(`
users:
  - {name: app, password: app-secret}
acls:
  - {user: app, allow: [produce, consume, create], resources: ["topic:events"]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, t.TempDir(), "--kafka-addr", "127.0.0.1:0", "--auth-file", users, "--kafka-sasl-session-lifetime", "10m")
	kafkaAddr := p.Addr("kafka")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	login := func(pass string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.AllowAutoTopicCreation(),
			kgo.SASL(scram.Auth{User: "app", Pass: pass}.AsSha512Mechanism()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	if err := login("app-secret").ProduceSync(ctx, &kgo.Record{Topic: "events", Value: []byte("hi")}).FirstErr(); err != nil {
		t.Fatalf("produce as app: %v", err)
	}
	if err := login("wrong").Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: %v", err)
	}
	_, body := get(p.url + "/metrics")
	if want := `sluice_auth_failures_total{protocol="kafka",reason="bad_credentials"} 1`; !strings.Contains(body, want) {
		t.Errorf("/metrics lacks %q", want)
	}
	p.Stop()
}
