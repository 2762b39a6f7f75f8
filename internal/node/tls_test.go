package node_test

import (
	"context"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/node"
	"github.com/sluice-mq/sluice/internal/server"
	"github.com/sluice-mq/sluice/internal/testproc"
	"github.com/sluice-mq/sluice/internal/tlsconf/tlstest"
)

// startTLSNode runs a node with every listener and its TLS twin on free
// 127.0.0.1 ports, serving a certificate of a fresh test CA (serial 7),
// with tune applied to its configuration.
func startTLSNode(t *testing.T, tune ...func(*server.Config)) (*server.Server, *tlstest.CA) {
	t.Helper()
	if err := tlstest.Available(); err != nil {
		testproc.Missing(t, "openssl is not installed ("+err.Error()+"): apt-get install openssl")
	}
	dir := t.TempDir()
	ca, err := tlstest.NewCA(dir, "node")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Issue("server", "sluice", 7)
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.Defaults()
	cfg.DataDir, cfg.Fsync = filepath.Join(t.TempDir(), "data"), "never"
	cfg.HTTPAddr, cfg.KafkaAddr, cfg.SQSAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.HTTPTLSAddr, cfg.KafkaTLSAddr, cfg.SQSTLSAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.TLSCertFile, cfg.TLSKeyFile = pair.Cert, pair.Key
	for _, f := range tune {
		f(&cfg)
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
	return srv, ca
}

// TestKafkaOverTLSBesidePlaintext: franz-go produces over TLS and consumes
// in clear text from one broker, and Metadata tells each client the
// address of the listener it is connected to, as Kafka does per listener.
func TestKafkaOverTLSBesidePlaintext(t *testing.T) {
	srv, ca := startTLSNode(t)
	ctx := t.Context()
	tc, err := ca.ClientConfig(tlstest.Pair{})
	if err != nil {
		t.Fatal(err)
	}
	overTLS, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr(server.KafkaTLS)), kgo.DialTLSConfig(tc),
		kgo.AllowAutoTopicCreation(), kgo.RequestRetries(2))
	if err != nil {
		t.Fatal(err)
	}
	defer overTLS.Close()
	plain, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr(server.Kafka)), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()

	for _, c := range []struct {
		name string
		cl   *kgo.Client
		want string
	}{{"tls", overTLS, srv.Addr(server.KafkaTLS)}, {"plaintext", plain, srv.Addr(server.Kafka)}} {
		md, err := kadm.NewClient(c.cl).BrokerMetadata(ctx)
		if err != nil {
			t.Fatalf("%s metadata: %v", c.name, err)
		}
		if len(md.Brokers) != 1 || net.JoinHostPort(md.Brokers[0].Host, strconv.Itoa(int(md.Brokers[0].Port))) != c.want {
			t.Errorf("%s client told brokers %+v, want %s", c.name, md.Brokers, c.want)
		}
	}

	if err := overTLS.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("over tls")}).FirstErr(); err != nil {
		t.Fatalf("produce over tls: %v", err)
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	fetches := plain.PollFetches(fctx)
	if err := fetches.Err(); err != nil {
		t.Fatalf("consume in clear text: %v", err)
	}
	if recs := fetches.Records(); len(recs) != 1 || string(recs[0].Value) != "over tls" {
		t.Errorf("consumed %d records, want the one produced over TLS", len(recs))
	}

	// And the other way: a TLS consumer reads what it fetches through the
	// copy path (no sendfile on a TLS connection).
	tlsConsumer, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr(server.KafkaTLS)), kgo.DialTLSConfig(tc),
		kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer tlsConsumer.Close()
	fetches = tlsConsumer.PollFetches(fctx)
	if recs := fetches.Records(); fetches.Err() != nil || len(recs) != 1 || string(recs[0].Value) != "over tls" {
		t.Errorf("tls consumer: %v, %d records", fetches.Err(), len(recs))
	}
}

// TestSQSOverHTTPSBesidePlaintext: aws-sdk-go-v2 over HTTPS creates a queue
// whose URL is https:// on the TLS port, sends, and a clear-text client
// receives the message from the same queue.
func TestSQSOverHTTPSBesidePlaintext(t *testing.T) {
	srv, ca := startTLSNode(t)
	ctx := t.Context()
	tc, err := ca.ClientConfig(tlstest.Pair{})
	if err != nil {
		t.Fatal(err)
	}
	sdk := func(endpoint string, hc *http.Client) *awssqs.Client {
		return awssqs.New(awssqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), HTTPClient: hc,
			Credentials: credentials.NewStaticCredentialsProvider("AKIDTLS", "secret", ""), RetryMaxAttempts: 1})
	}
	// HTTP/2, as the SDK's own transport negotiates it by ALPN (the AWS CLI
	// test in e2e speaks HTTP/1.1): long polls and the body guards hold on
	// either.
	tr := &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	https := sdk("https://"+srv.Addr(server.SQSTLS), hc)
	plain := sdk("http://"+srv.Addr(server.SQS), http.DefaultClient)

	q, err := https.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("jobs")})
	if err != nil {
		t.Fatalf("CreateQueue over https: %v", err)
	}
	if want := "https://" + srv.Addr(server.SQSTLS) + "/"; !strings.HasPrefix(aws.ToString(q.QueueUrl), want) {
		t.Errorf("queue url %s over https, want it under %s", aws.ToString(q.QueueUrl), want)
	}
	if _, err := https.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("hi")}); err != nil {
		t.Fatalf("SendMessage over https: %v", err)
	}
	pq, err := plain.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String("jobs")})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(aws.ToString(pq.QueueUrl), "http://"+srv.Addr(server.SQS)+"/") {
		t.Errorf("queue url %s in clear text", aws.ToString(pq.QueueUrl))
	}
	got, err := plain.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: pq.QueueUrl, WaitTimeSeconds: 5})
	if err != nil || len(got.Messages) != 1 || aws.ToString(got.Messages[0].Body) != "hi" {
		t.Fatalf("receive in clear text: %v %+v", err, got)
	}
	// An empty long poll over HTTPS waits and answers.
	began := time.Now()
	empty, err := https.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 1})
	if err != nil || len(empty.Messages) != 0 || time.Since(began) < 900*time.Millisecond {
		t.Errorf("empty long poll over https: %v, %d messages after %s", err, len(empty.Messages), time.Since(began))
	}
	resp, err := hc.Get("https://" + srv.Addr(server.SQSTLS) + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Errorf("the SQS TLS listener spoke %s, want HTTP/2 by ALPN", resp.Proto)
	}
}

// TestNativeClientOverHTTPS: the Go client works against the native TLS
// listener (Connect and gRPC over HTTP/2 by ALPN, with WithTLS) as
// against the plaintext one, one that does not trust the CA fails, and the
// data directory it wrote holds nothing other users can read.
func TestNativeClientOverHTTPS(t *testing.T) {
	srv, ca := startTLSNode(t)
	ctx := t.Context()
	tc, err := ca.ClientConfig(tlstest.Pair{})
	if err != nil {
		t.Fatal(err)
	}
	c := client.New("https://"+srv.Addr(server.HTTPTLS), client.WithTLS(tc))
	if _, err := c.CreateQueue(ctx, "mail", nil); err != nil {
		t.Fatalf("CreateQueue over https: %v", err)
	}
	grpc := client.New("https://"+srv.Addr(server.HTTPTLS), client.WithTLS(tc), client.WithProtocol(client.ProtocolGRPC))
	if _, err := grpc.GetQueue(ctx, "mail"); err != nil {
		t.Fatalf("gRPC over TLS: %v", err)
	}
	untrusted := client.New("https://" + srv.Addr(server.HTTPTLS))
	if _, err := untrusted.GetQueue(ctx, "mail"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client that does not trust the CA: %v, want a certificate error", err)
	}
	if _, err := c.CreateTopic(ctx, "events", nil); err != nil {
		t.Fatal(err)
	}
	plain := client.New("http://" + srv.Addr(server.HTTP))
	if _, err := plain.GetQueue(ctx, "mail"); err != nil {
		t.Errorf("the queue made over https, asked in clear text: %v", err)
	}

	err = filepath.WalkDir(srv.Config().DataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: mode %v, open to other users", path, info.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
