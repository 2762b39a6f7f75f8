package node_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/server"
)

// BenchmarkRoundTrip is one message through each protocol's front-end on
// loopback (fsync never, so the front-ends' work is what is timed): a
// native send, receive and ack; an SQS send, receive and delete; a Kafka
// produce of one record (acks=all). Tracing is off unless
// SLUICE_BENCH_OTLP names a collector; docs/benchmarks.md, "Tracing off",
// compares it with the code before tracing existed:
//
//	go test -run '^$' -bench RoundTrip -benchmem -count 5 ./internal/node/
func BenchmarkRoundTrip(b *testing.B) {
	srv := benchServer(b)
	ctx := context.Background()
	b.Run("native-queue", func(b *testing.B) {
		c := client.New("http://"+srv.Addr(server.HTTP), client.WithHTTPClient(&http.Client{}))
		if _, err := c.CreateQueue(ctx, "nq", nil); err != nil {
			b.Fatal(err)
		}
		body := make([]byte, 1024)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Send(ctx, "nq", body); err != nil {
				b.Fatal(err)
			}
			ms, err := c.Receive(ctx, "nq")
			if err != nil || len(ms) != 1 {
				b.Fatal(ms, err)
			}
			if err := c.Ack(ctx, "nq", ms[0].GetReceipt()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sqs-queue", func(b *testing.B) {
		awsCfg, err := config.LoadDefaultConfig(ctx, config.WithRegion("us-east-1"),
			config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")))
		if err != nil {
			b.Fatal(err)
		}
		sc := awssqs.NewFromConfig(awsCfg, func(o *awssqs.Options) { o.BaseEndpoint = aws.String("http://" + srv.Addr(server.SQS)) })
		q, err := sc.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("sq")})
		if err != nil {
			b.Fatal(err)
		}
		body := aws.String(strings.Repeat("x", 1024))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := sc.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: body}); err != nil {
				b.Fatal(err)
			}
			out, err := sc.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: q.QueueUrl})
			if err != nil || len(out.Messages) != 1 {
				b.Fatal(out, err)
			}
			if _, err := sc.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: out.Messages[0].ReceiptHandle}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("kafka-produce", func(b *testing.B) {
		c := client.New("http://" + srv.Addr(server.HTTP))
		if _, err := c.CreateTopic(ctx, "kt", nil); err != nil {
			b.Fatal(err)
		}
		kc, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr(server.Kafka)), kgo.DefaultProduceTopic("kt"), kgo.ProducerLinger(0))
		if err != nil {
			b.Fatal(err)
		}
		defer kc.Close()
		rec := make([]byte, 1024)
		b.ReportAllocs()
		for b.Loop() {
			if err := kc.ProduceSync(ctx, &kgo.Record{Value: rec}).FirstErr(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func benchServer(b *testing.B) *server.Server {
	return startNodeWith(b, benchTracing)
}
