package sqs_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/sqs"
)

// env is an aws-sdk-go-v2 client pointed at an SQS endpoint: the handler on
// an httptest listener with a broker of its own (newEnv), or any running
// listener such as the real binary's (newClientEnv).
type env struct {
	t        *testing.T
	b        *broker.Broker // nil unless newEnv started the broker
	endpoint string         // the base URL, http://127.0.0.1:port
	c        *awssqs.Client
	ctx      context.Context
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newEnv starts a broker on a temporary directory behind the SQS handler on
// a 127.0.0.1 listener and returns a client of it.
func newEnv(t *testing.T) *env {
	t.Helper()
	b, err := broker.Open(broker.Options{Dir: t.TempDir(), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sqs.NewHandler(b, sqs.Config{Logger: quietLogger()}))
	t.Cleanup(func() {
		srv.Close()
		b.Close()
	})
	e := newClientEnv(t, srv.URL)
	e.b = b
	return e
}

// newClientEnv returns a client of the SQS endpoint at base URL endpoint.
func newClientEnv(t *testing.T, endpoint string) *env {
	t.Helper()
	return newClientEnvAs(t, endpoint, "AKIDSLUICETEST", "secret")
}

// newClientEnvAs is newClientEnv signing with the access key given.
func newClientEnvAs(t *testing.T, endpoint, keyID, secret string) *env {
	t.Helper()
	// The whole test's budget, not one call's: a test that also runs the
	// AWS CLIs (two Python processes, ~46 s together on a loaded machine)
	// ran out of a 30 s one.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cfg, err := config.LoadDefaultConfig(ctx,
		config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(keyID, secret, "")),
		config.WithRetryMaxAttempts(1),
	)
	if err != nil {
		t.Fatal(err)
	}
	c := awssqs.NewFromConfig(cfg, func(o *awssqs.Options) { o.BaseEndpoint = aws.String(endpoint) })
	return &env{t: t, endpoint: endpoint, c: c, ctx: ctx}
}

// createQueue creates a queue through the SDK and returns its URL.
func (e *env) createQueue(name string, attrs map[string]string) string {
	e.t.Helper()
	out, err := e.c.CreateQueue(e.ctx, &awssqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		e.t.Fatalf("CreateQueue %s: %v", name, err)
	}
	return aws.ToString(out.QueueUrl)
}
