package node_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/node"
	"github.com/sluice-mq/sluice/internal/server"
	"github.com/sluice-mq/sluice/internal/telemetry/otlptest"
)

// A producer's context per direction: trace id and parent span id.
type producerCtx struct{ trace, span string }

func (p producerCtx) traceparent() string { return "00-" + p.trace + "-" + p.span + "-01" }

// xray is p as SQS's AWSTraceHeader (X-Ray) writes it.
func (p producerCtx) xray() string {
	return "Root=1-" + p.trace[:8] + "-" + p.trace[8:] + ";Parent=" + p.span + ";Sampled=1"
}

// tracedNode is a node with tracing on, exporting to an in-process OTLP
// collector, and a client of each protocol.
type tracedNode struct {
	col    *otlptest.Collector
	native *client.Client
	sqs    *awssqs.Client
	kafka  string // bootstrap address
}

// ctxTraceparent is the traceparent a native call's HTTP request carries.
type ctxTraceparent struct{}

// headerTransport sets the traceparent header a native call's context names.
type headerTransport struct{}

func (headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if tp, ok := r.Context().Value(ctxTraceparent{}).(string); ok {
		r = r.Clone(r.Context())
		r.Header.Set("traceparent", tp)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func withTraceparent(ctx context.Context, tp string) context.Context {
	return context.WithValue(ctx, ctxTraceparent{}, tp)
}

func startTracedNode(t *testing.T, endpoint string) (*server.Server, *tracedNode) {
	t.Helper()
	srv, n, stop := startTracedNodeIn(t, endpoint, t.TempDir())
	t.Cleanup(stop)
	return srv, n
}

// startTracedNodeIn runs the node on dir until stop.
func startTracedNodeIn(t *testing.T, endpoint, dir string) (*server.Server, *tracedNode, func()) {
	t.Helper()
	// The SDK's batch processor sends every 50 ms instead of every 5 s.
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	cfg := server.Defaults()
	cfg.DataDir, cfg.HTTPAddr, cfg.KafkaAddr, cfg.SQSAddr = dir, "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.Fsync = "never"
	cfg.OTLPEndpoint = endpoint
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
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-waited; err != nil {
				t.Errorf("shutdown: %v", err)
			}
		})
	}
	awsCfg, err := config.LoadDefaultConfig(t.Context(), config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")), config.WithRetryMaxAttempts(1))
	if err != nil {
		stop()
		t.Fatal(err)
	}
	sqsURL := "http://" + srv.Addr(server.SQS)
	return srv, &tracedNode{
		native: client.New("http://"+srv.Addr(server.HTTP), client.WithHTTPClient(&http.Client{Transport: headerTransport{}})),
		sqs:    awssqs.NewFromConfig(awsCfg, func(o *awssqs.Options) { o.BaseEndpoint = aws.String(sqsURL) }),
		kafka:  srv.Addr(server.Kafka),
	}, stop
}

// span waits for the span named name in trace p.trace.
func (n *tracedNode) span(t *testing.T, name string, p producerCtx) otlptest.Span {
	t.Helper()
	s, ok := n.col.Find(10*time.Second, func(s otlptest.Span) bool { return s.Name == name && s.TraceID == p.trace })
	if !ok {
		var seen []string
		for _, s := range n.col.Spans() {
			seen = append(seen, s.Name+" "+s.TraceID+"/"+s.ParentID)
		}
		t.Fatalf("no span %q in trace %s; received: %v", name, p.trace, seen)
	}
	return s
}

// checkSpan: s is the child of p (the producer's span), links to it when
// wantLink, and carries the messaging attributes given.
func checkSpan(t *testing.T, s otlptest.Span, p producerCtx, wantLink bool, attrs map[string]string) {
	t.Helper()
	if s.ParentID != p.span {
		t.Errorf("%s: parent %q, want the producer's span %s", s.Name, s.ParentID, p.span)
	}
	if wantLink && (len(s.Links) != 1 || s.Links[0].TraceID != p.trace || s.Links[0].SpanID != p.span) {
		t.Errorf("%s: links %+v, want one to %s/%s", s.Name, s.Links, p.trace, p.span)
	}
	for k, v := range attrs {
		if s.Attrs[k] != v {
			t.Errorf("%s: %s = %q, want %q (all: %v)", s.Name, k, s.Attrs[k], v, s.Attrs)
		}
	}
	if s.Kind != 2 { // SPAN_KIND_SERVER
		t.Errorf("%s: kind %d, want server (2)", s.Name, s.Kind)
	}
}

func headerValue(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// TestTracesCrossProtocols is issue 20's "traces cross every protocol":
// a node exports to an in-process OTLP collector; a message produced with
// a trace context over one protocol is received over another with that
// context, and the collector has the server's spans in the producer's
// trace, parented and linked to the producer's span, with the messaging
// attributes.
func TestTracesCrossProtocols(t *testing.T) {
	col := otlptest.Start()
	defer col.Close()
	_, n := startTracedNode(t, col.URL())
	n.col = col
	ctx := t.Context()
	if _, err := n.native.CreateTopic(ctx, "events", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := n.native.CreateSubscription(ctx, "events", "audit", &client.SubscriptionConfig{FromEarliest: true}); err != nil {
		t.Fatal(err)
	}
	queueURL := ""
	if out, err := n.sqs.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("jobs")}); err != nil {
		t.Fatal(err)
	} else {
		queueURL = aws.ToString(out.QueueUrl)
	}
	kc, err := kgo.NewClient(kgo.SeedBrokers(n.kafka), kgo.ConsumeTopics("events"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()

	t.Run("kafka to native", func(t *testing.T) {
		p := producerCtx{"4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"}
		rec := &kgo.Record{Topic: "events", Value: []byte("from kafka"), Headers: []kgo.RecordHeader{{Key: "traceparent", Value: []byte(p.traceparent())}}}
		if err := kc.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
		msgs, err := n.native.Receive(ctx, "events/audit", client.Wait(5*time.Second))
		if err != nil || len(msgs) != 1 {
			t.Fatalf("receive: %v %v", msgs, err)
		}
		if got := string(msgs[0].GetAttributes()["traceparent"].GetValue()); got != p.traceparent() {
			t.Errorf("native consumer sees traceparent %q, want %q", got, p.traceparent())
		}
		checkSpan(t, n.span(t, "produce events", p), p, true, map[string]string{
			"messaging.system": "kafka", "messaging.operation.type": "send", "messaging.destination.name": "events",
			"messaging.destination.partition.id": "0", "messaging.batch.message_count": "1"})
		checkSpan(t, n.span(t, "receive events/audit", p), p, true, map[string]string{
			"messaging.system": "sluice", "messaging.operation.type": "receive", "messaging.destination.name": "events/audit"})
		if err := n.native.Ack(withTraceparent(ctx, p.traceparent()), "events/audit", msgs[0].GetReceipt()); err != nil {
			t.Fatal(err)
		}
		checkSpan(t, n.span(t, "ack events/audit", p), p, false, map[string]string{"messaging.operation.type": "settle"})
	})

	t.Run("kafka to sqs", func(t *testing.T) {
		// A subscription read over SQS: its queue URL escapes the "/".
		p := producerCtx{"b1b2b3b4b5b6b7b8c1c2c3c4c5c6c7c8", "d1d2d3d4d5d6d7d8"}
		if _, err := n.native.CreateTopic(ctx, "orders", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := n.native.CreateSubscription(ctx, "orders", "billing", &client.SubscriptionConfig{FromEarliest: true}); err != nil {
			t.Fatal(err)
		}
		rec := &kgo.Record{Topic: "orders", Value: []byte("order 1"), Headers: []kgo.RecordHeader{{Key: "traceparent", Value: []byte(p.traceparent())}}}
		if err := kc.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
		u, err := n.sqs.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String("orders/billing")})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(aws.ToString(u.QueueUrl), "/000000000000/orders%2Fbilling") {
			t.Errorf("subscription URL %q", aws.ToString(u.QueueUrl))
		}
		out, err := n.sqs.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: u.QueueUrl, WaitTimeSeconds: 5,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAWSTraceHeader},
			MessageAttributeNames:       []string{"All"}})
		if err != nil || len(out.Messages) != 1 {
			t.Fatalf("receive: %v %v", out, err)
		}
		m := out.Messages[0]
		if aws.ToString(m.Body) != "order 1" {
			t.Errorf("body %q", aws.ToString(m.Body))
		}
		if got := m.Attributes["AWSTraceHeader"]; got != p.xray() {
			t.Errorf("AWSTraceHeader %q, want the Kafka producer's as X-Ray %q", got, p.xray())
		}
		if got := aws.ToString(m.MessageAttributes["traceparent"].StringValue); got != p.traceparent() {
			t.Errorf("traceparent attribute (the record's header) %q, want %q", got, p.traceparent())
		}
		checkSpan(t, n.span(t, "receive orders/billing", p), p, true, map[string]string{
			"messaging.system": "aws_sqs", "messaging.destination.name": "orders/billing"})
		if _, err := n.sqs.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: u.QueueUrl, ReceiptHandle: m.ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("native to kafka", func(t *testing.T) {
		p := producerCtx{"aaaabbbbccccddddeeeeffff00001111", "1111222233334444"}
		if _, err := n.native.Produce(withTraceparent(ctx, p.traceparent()), "events", []*client.ProduceRecord{{Value: []byte("from native")}}, nil); err != nil {
			t.Fatal(err)
		}
		checkSpan(t, n.span(t, "produce events", p), p, true, map[string]string{"messaging.system": "sluice", "messaging.batch.message_count": "1"})
		var got *kgo.Record
		for got == nil {
			fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			fs := kc.PollFetches(fctx)
			timedOut := fctx.Err() != nil
			cancel()
			if timedOut {
				t.Fatal("the native record never reached the Kafka consumer")
			}
			fs.EachRecord(func(r *kgo.Record) {
				if string(r.Value) == "from native" {
					got = r
				}
			})
		}
		if tp := headerValue(got, "traceparent"); tp != p.traceparent() {
			t.Errorf("Kafka consumer sees traceparent header %q, want the native producer's %q", tp, p.traceparent())
		}
		s, ok := n.col.Find(10*time.Second, func(s otlptest.Span) bool { return s.Name == "fetch events" })
		if !ok || s.Attrs["messaging.system"] != "kafka" || s.Attrs["messaging.operation.type"] != "receive" {
			t.Errorf("Kafka fetch span: %+v (found %v)", s, ok)
		}
	})

	t.Run("native to sqs", func(t *testing.T) {
		p := producerCtx{"0123456789abcdef0123456789abcdef", "0123456789abcdef"}
		if _, err := n.native.Send(withTraceparent(ctx, p.traceparent()), "jobs", []byte("from native")); err != nil {
			t.Fatal(err)
		}
		out, err := n.sqs.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), WaitTimeSeconds: 5,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAWSTraceHeader},
			MessageAttributeNames:       []string{"All"}})
		if err != nil || len(out.Messages) != 1 {
			t.Fatalf("receive: %v %v", out, err)
		}
		m := out.Messages[0]
		if got := m.Attributes["AWSTraceHeader"]; got != p.xray() {
			t.Errorf("AWSTraceHeader %q, want %q", got, p.xray())
		}
		// The SDK has checked MD5OfMessageAttributes over this attribute.
		if got := aws.ToString(m.MessageAttributes["traceparent"].StringValue); got != p.traceparent() {
			t.Errorf("traceparent attribute %q, want %q", got, p.traceparent())
		}
		checkSpan(t, n.span(t, "send jobs", p), p, true, map[string]string{"messaging.system": "sluice", "messaging.operation.type": "send"})
		checkSpan(t, n.span(t, "receive jobs", p), p, true, map[string]string{
			"messaging.system": "aws_sqs", "messaging.operation.type": "receive", "messaging.destination.name": "jobs",
			"messaging.batch.message_count": "1", "rpc.method": "ReceiveMessage"})
	})

	t.Run("sqs to native", func(t *testing.T) {
		p := producerCtx{"5759e988bd862e3fe1be46a994272793", "53995c3f42cd8ad8"}
		_, err := n.sqs.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String("from sqs"),
			MessageSystemAttributes: map[string]sqstypes.MessageSystemAttributeValue{
				"AWSTraceHeader": {DataType: aws.String("String"), StringValue: aws.String(p.xray())}}})
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := n.native.Receive(ctx, "jobs", client.Wait(5*time.Second))
		if err != nil || len(msgs) != 1 {
			t.Fatalf("receive: %v %v", msgs, err)
		}
		if got := string(msgs[0].GetAttributes()["traceparent"].GetValue()); got != p.traceparent() {
			t.Errorf("native consumer sees traceparent %q, want the X-Ray producer's %q", got, p.traceparent())
		}
		checkSpan(t, n.span(t, "send jobs", p), p, true, map[string]string{"messaging.system": "aws_sqs", "rpc.method": "SendMessage"})
		checkSpan(t, n.span(t, "receive jobs", p), p, true, map[string]string{"messaging.system": "sluice"})
	})

	t.Run("sqs to native consume stream", func(t *testing.T) {
		p := producerCtx{"e1e2e3e4e5e6e7e8e9eaebecedeeeff0", "a1a2a3a4a5a6a7a8"}
		_, err := n.sqs.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String("streamed"),
			MessageSystemAttributes: map[string]sqstypes.MessageSystemAttributeValue{
				"AWSTraceHeader": {DataType: aws.String("String"), StringValue: aws.String(p.xray())}}})
		if err != nil {
			t.Fatal(err)
		}
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		for m, err := range n.native.Consume(sctx, "jobs") {
			if err != nil {
				t.Fatal(err)
			}
			if got := string(m.GetAttributes()["traceparent"].GetValue()); got != p.traceparent() {
				t.Errorf("Consume stream sees traceparent %q, want %q", got, p.traceparent())
			}
			if err := n.native.Ack(ctx, "jobs", m.GetReceipt()); err != nil {
				t.Fatal(err)
			}
			break
		}
		checkSpan(t, n.span(t, "receive jobs", p), p, true, map[string]string{
			"messaging.system": "sluice", "rpc.method": "/sluice.v1.QueueService/Consume", "messaging.batch.message_count": "1"})
	})

	t.Run("sqs traceparent attribute to sqs", func(t *testing.T) {
		// The OpenTelemetry SQS instrumentations' form: a String message
		// attribute; the receive span and AWSTraceHeader follow it.
		p := producerCtx{"fedcba9876543210fedcba9876543210", "fedcba9876543210"}
		_, err := n.sqs.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String("otel style"),
			MessageAttributes: map[string]sqstypes.MessageAttributeValue{"traceparent": {DataType: aws.String("String"), StringValue: aws.String(p.traceparent())}}})
		if err != nil {
			t.Fatal(err)
		}
		out, err := n.sqs.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), WaitTimeSeconds: 5,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll}})
		if err != nil || len(out.Messages) != 1 {
			t.Fatalf("receive: %v %v", out, err)
		}
		if got := out.Messages[0].Attributes["AWSTraceHeader"]; got != p.xray() {
			t.Errorf("AWSTraceHeader %q, want %q", got, p.xray())
		}
		if len(out.Messages[0].MessageAttributes) != 0 {
			t.Errorf("message attributes not asked for were returned: %v", out.Messages[0].MessageAttributes)
		}
		checkSpan(t, n.span(t, "receive jobs", p), p, true, nil)
		if _, err := n.sqs.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: out.Messages[0].ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
		if s, ok := n.col.Find(10*time.Second, func(s otlptest.Span) bool { return s.Name == "delete jobs" }); !ok || s.Attrs["messaging.operation.type"] != "settle" {
			t.Errorf("delete span: %+v (found %v)", s, ok)
		}
	})

	t.Run("malformed traceparent ignored", func(t *testing.T) {
		const bad = "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01" // uppercase: not W3C
		if _, err := n.native.Send(withTraceparent(ctx, bad), "jobs", []byte("bad context")); err != nil {
			t.Fatalf("a malformed traceparent must not fail the call: %v", err)
		}
		out, err := n.sqs.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), WaitTimeSeconds: 5,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"}})
		if err != nil || len(out.Messages) != 1 {
			t.Fatalf("receive: %v %v", out, err)
		}
		if h, ok := out.Messages[0].Attributes["AWSTraceHeader"]; ok {
			t.Errorf("a malformed context was propagated as AWSTraceHeader %q", h)
		}
		if len(out.Messages[0].MessageAttributes) != 0 {
			t.Errorf("a malformed context was propagated as attributes %v", out.Messages[0].MessageAttributes)
		}
		rec := &kgo.Record{Topic: "events", Value: []byte("bad header"), Headers: []kgo.RecordHeader{{Key: "traceparent", Value: []byte("garbage")}}}
		if err := kc.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatalf("a malformed traceparent header must not fail the produce: %v", err)
		}
		if s, ok := n.col.Find(10*time.Second, func(s otlptest.Span) bool {
			return s.Name == "produce events" && s.Attrs["messaging.system"] == "kafka" && s.ParentID == ""
		}); !ok || len(s.Links) != 0 {
			t.Errorf("produce with a malformed header: want a root span without links, got %+v (found %v)", s, ok)
		}
		// The send is still traced, as a trace of its own.
		s, ok := n.col.Find(10*time.Second, func(s otlptest.Span) bool {
			return s.Name == "send jobs" && s.Attrs["messaging.system"] == "sluice" && s.TraceID != "0123456789abcdef0123456789abcdef"
		})
		if !ok || s.ParentID != "" || strings.EqualFold(s.TraceID, "4bf92f3577b34da6a3ce929d0e0e4736") {
			t.Errorf("send with a malformed context: want a root span of a new trace, got %+v (found %v)", s, ok)
		}
	})
}

// TestTracingOffChangesNothing: with no --otlp-endpoint a traceparent on a
// native send is neither stored nor shown, SQS returns no AWSTraceHeader
// the producer did not set, and nothing reaches a collector.
func TestTracingOffChangesNothing(t *testing.T) {
	col := otlptest.Start()
	defer col.Close()
	// The SDK's own variable alone does not turn tracing on: only
	// --otlp-endpoint does.
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", col.URL())
	_, n := startTracedNode(t, "")
	ctx := t.Context()
	out, err := n.sqs.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("jobs")})
	if err != nil {
		t.Fatal(err)
	}
	p := producerCtx{"4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"}
	if _, err := n.native.Send(withTraceparent(ctx, p.traceparent()), "jobs", []byte("untraced")); err != nil {
		t.Fatal(err)
	}
	rcv, err := n.sqs.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: out.QueueUrl, WaitTimeSeconds: 5,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"}})
	if err != nil || len(rcv.Messages) != 1 {
		t.Fatalf("receive: %v %v", rcv, err)
	}
	m := rcv.Messages[0]
	if _, ok := m.Attributes["AWSTraceHeader"]; ok || len(m.MessageAttributes) != 0 || m.MD5OfMessageAttributes != nil {
		t.Errorf("tracing off changed the response: %v %v", m.Attributes, m.MessageAttributes)
	}
	if len(m.Attributes) != 4 { // SenderId, SentTimestamp, ApproximateReceiveCount, ApproximateFirstReceiveTimestamp
		t.Errorf("system attributes %v, want the four SQS always has", m.Attributes)
	}
	time.Sleep(200 * time.Millisecond) // four schedule delays: a span would have been sent
	if col.Requests() != 0 {
		t.Errorf("with tracing off the collector got %d requests", col.Requests())
	}
}

// benchTracing turns tracing on for BenchmarkRoundTrip when
// SLUICE_BENCH_OTLP names a collector.
func benchTracing(cfg *server.Config) {
	cfg.OTLPEndpoint = os.Getenv("SLUICE_BENCH_OTLP")
}

// TestTraceContextSurvivesRestart: the context a native producer's call
// carried is stored with the message, not held in memory: after a restart
// an SQS consumer still gets it as AWSTraceHeader, and the receive span
// is still in the producer's trace.
func TestTraceContextSurvivesRestart(t *testing.T) {
	col := otlptest.Start()
	defer col.Close()
	dir := t.TempDir()
	p := producerCtx{"0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"}
	_, n, stop := startTracedNodeIn(t, col.URL(), dir)
	ctx := t.Context()
	if _, err := n.native.CreateQueue(ctx, "kept", nil); err != nil {
		stop()
		t.Fatal(err)
	}
	if _, err := n.native.Send(withTraceparent(ctx, p.traceparent()), "kept", []byte("across a restart")); err != nil {
		stop()
		t.Fatal(err)
	}
	stop()

	srv, n, stop := startTracedNodeIn(t, col.URL(), dir)
	defer stop()
	n.col = col
	out, err := n.sqs.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String("http://" + srv.Addr(server.SQS) + "/000000000000/kept"),
		WaitTimeSeconds: 5, MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAWSTraceHeader}})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("receive after restart: %v %v", out, err)
	}
	if got := out.Messages[0].Attributes["AWSTraceHeader"]; got != p.xray() {
		t.Errorf("after a restart AWSTraceHeader is %q, want %q", got, p.xray())
	}
	checkSpan(t, n.span(t, "receive kept", p), p, true, map[string]string{"messaging.system": "aws_sqs"})
}
