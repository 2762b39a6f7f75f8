package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-mq/sluice/bench/compare/load"
)

// sqsDriver runs the bench over the SQS API (JSON protocol) with
// aws-sdk-go-v2. SQS has only queues, so every kind is a queue; batches go
// out in SendMessageBatch calls of up to 10, acks in DeleteMessageBatch.
type sqsDriver struct {
	c   *awssqs.Client
	url string // of the queue Prepare made
}

func newSQSDriver(ctx context.Context, endpoint string) (*sqsDriver, error) {
	// Keep a connection per message in flight: the default transport keeps
	// few idle per host, and reconnecting would be what the run measures.
	hc := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) { t.MaxIdleConns, t.MaxIdleConnsPerHost = 0, 1024 })
	cfg, err := config.LoadDefaultConfig(ctx,
		config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("bench", "bench", "")),
		config.WithHTTPClient(hc),
	)
	if err != nil {
		return nil, err
	}
	c := awssqs.NewFromConfig(cfg, func(o *awssqs.Options) { o.BaseEndpoint = aws.String(endpoint) })
	return &sqsDriver{c: c}, nil
}

func (d *sqsDriver) Close() error { return nil }

func (d *sqsDriver) Prepare(ctx context.Context, name string, _ load.Kind) error {
	got, err := d.c.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: &name})
	var missing *types.QueueDoesNotExist
	switch {
	case err == nil:
		if _, err := d.c.DeleteQueue(ctx, &awssqs.DeleteQueueInput{QueueUrl: got.QueueUrl}); err != nil {
			return err
		}
	case !errors.As(err, &missing):
		return err
	}
	out, err := d.c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: &name})
	if err != nil {
		return err
	}
	d.url = aws.ToString(out.QueueUrl)
	return nil
}

func (d *sqsDriver) Producer(context.Context, string, load.Kind, int) (load.Producer, error) {
	return &sqsClient{c: d.c, url: d.url}, nil
}

func (d *sqsDriver) Consumer(context.Context, string, load.Kind, int) (load.Consumer, error) {
	return &sqsClient{c: d.c, url: d.url}, nil
}

// sqsClient is a producer or a consumer of one queue.
type sqsClient struct {
	c   *awssqs.Client
	url string
}

func (s *sqsClient) Close() error { return nil }

func (s *sqsClient) Send(ctx context.Context, bodies [][]byte) error {
	if len(bodies) == 1 {
		_, err := s.c.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &s.url, MessageBody: aws.String(string(bodies[0]))})
		return err
	}
	for len(bodies) > 0 {
		n := min(len(bodies), 10)
		entries := make([]types.SendMessageBatchRequestEntry, n)
		for i, b := range bodies[:n] {
			entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(string(b))}
		}
		out, err := s.c.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: &s.url, Entries: entries})
		if err != nil {
			return err
		}
		if len(out.Failed) > 0 {
			return fmt.Errorf("SendMessageBatch: %d failed: %s", len(out.Failed), aws.ToString(out.Failed[0].Message))
		}
		bodies = bodies[n:]
	}
	return nil
}

func (s *sqsClient) Receive(ctx context.Context, limit int, wait time.Duration) ([]load.Msg, error) {
	// SQS waits in whole seconds; 0 would poll in a busy loop, and a long
	// poll returns as soon as a message is there.
	secs := int32(max(1, wait/time.Second))
	out, err := s.c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &s.url,
		MaxNumberOfMessages: int32(min(limit, 10)), WaitTimeSeconds: secs})
	if err != nil {
		return nil, err
	}
	msgs := make([]load.Msg, len(out.Messages))
	for i, m := range out.Messages {
		msgs[i] = load.Msg{Body: []byte(aws.ToString(m.Body)), Handle: m.ReceiptHandle}
	}
	return msgs, nil
}

func (s *sqsClient) Ack(ctx context.Context, msgs []load.Msg) error {
	for len(msgs) > 0 {
		n := min(len(msgs), 10)
		entries := make([]types.DeleteMessageBatchRequestEntry, n)
		for i, m := range msgs[:n] {
			entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.Handle.(*string)}
		}
		out, err := s.c.DeleteMessageBatch(ctx, &awssqs.DeleteMessageBatchInput{QueueUrl: &s.url, Entries: entries})
		if err != nil {
			return err
		}
		if len(out.Failed) > 0 {
			return fmt.Errorf("DeleteMessageBatch: %d failed: %s", len(out.Failed), aws.ToString(out.Failed[0].Message))
		}
		msgs = msgs[n:]
	}
	return nil
}
