package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
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
	c        *awssqs.Client
	url      string // of the queue Prepare made
	prefetch int    // messages a consumer holds received and not yet deleted
	raw      *http.Client
}

func newSQSDriver(ctx context.Context, endpoint string, prefetch int, tc *tls.Config, rawSend bool) (*sqsDriver, error) {
	// Keep a connection per message in flight: the default transport keeps
	// few idle per host, and reconnecting would be what the run measures.
	// Over TLS, HTTP/1.1 as in clear text (AWS's SQS endpoints speak it),
	// so the two runs differ by TLS alone.
	hc := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConns, t.MaxIdleConnsPerHost = 0, 1024
		if tc != nil {
			t.TLSClientConfig, t.ForceAttemptHTTP2 = tc.Clone(), false
		}
	})
	// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY sign for a server with
	// --auth-file; without them any key does.
	id, secret := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	if id == "" {
		id, secret = "bench", "bench"
	}
	cfg, err := config.LoadDefaultConfig(ctx,
		config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(id, secret, "")),
		config.WithHTTPClient(hc),
	)
	if err != nil {
		return nil, err
	}
	c := awssqs.NewFromConfig(cfg, func(o *awssqs.Options) { o.BaseEndpoint = aws.String(endpoint) })
	d := &sqsDriver{c: c, prefetch: prefetch}
	if rawSend {
		d.raw = &http.Client{Transport: &http.Transport{MaxIdleConns: 0, MaxIdleConnsPerHost: 1024, TLSClientConfig: tc}}
	}
	return d, nil
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
	return &sqsClient{c: d.c, url: d.url, raw: d.raw}, nil
}

func (d *sqsDriver) Consumer(ctx context.Context, _ string, _ load.Kind, _ int) (load.Consumer, error) {
	return newSQSConsumer(ctx, d.c, d.url, d.prefetch), nil
}

// sqsClient is a producer of one queue.
type sqsClient struct {
	c   *awssqs.Client
	url string
	raw *http.Client // --sqs-raw-send: single sends without the SDK
}

func (s *sqsClient) Close() error { return nil }

func (s *sqsClient) Send(ctx context.Context, bodies [][]byte) error {
	if len(bodies) == 1 && s.raw != nil {
		return s.rawSend(ctx, bodies[0])
	}
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

// sqsConsumer is one consumer of a queue holding up to prefetch messages
// received and not yet deleted, as the workloads define a consumer (W2: 64
// unacked each) and as the native driver's Consume stream does. SQS hands
// out at most 10 messages per ReceiveMessage, so a consumer that is to hold
// 64 keeps several receives going, which is what SQS's documentation
// advises for throughput and what its buffered and listener clients do (the
// Java SDK's AmazonSQSBufferedAsyncClient prefetching, Spring Cloud AWS's
// concurrent pollers): ceil(prefetch/10) pollers, each with a quota of 10
// (the last one the rest), long-poll for their quota and poll again once
// all of it is deleted, while the owner deletes what it already has. The
// deletes of one Ack (at most 10 per DeleteMessageBatch) go out at once.
//
// Before, a consumer received 10, deleted them and only then asked again:
// it held at most 10 messages and waited two round trips per 10, so W2 over
// SQS measured the consumers' own pauses (945 msgs/s against 14,597 native).
// The pollers are owned by Close.
type sqsConsumer struct {
	c      *awssqs.Client
	url    string
	msgs   chan load.Msg
	errc   chan error
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// sqsHeld is the Handle of a message an sqsConsumer holds: its receipt and
// the quota of the poller that received it, freed by its delete.
type sqsHeld struct {
	receipt *string
	quota   chan<- struct{}
}

// sqsMaxReceive is SQS's limit of messages per ReceiveMessage and of
// entries per DeleteMessageBatch.
const sqsMaxReceive = 10

func newSQSConsumer(ctx context.Context, c *awssqs.Client, url string, prefetch int) *sqsConsumer {
	prefetch = max(prefetch, 1)
	ctx, cancel := context.WithCancel(ctx)
	q := &sqsConsumer{c: c, url: url, msgs: make(chan load.Msg, prefetch), errc: make(chan error, 1), cancel: cancel}
	for left := prefetch; left > 0; left -= sqsMaxReceive {
		n := min(left, sqsMaxReceive)
		q.wg.Go(func() { q.poll(ctx, n) })
	}
	return q
}

// poll receives up to n messages at a time, each time once the n it
// received before are deleted, until ctx ends or a receive fails.
func (q *sqsConsumer) poll(ctx context.Context, n int) {
	free := make(chan struct{}, n) // a token per message of the quota not held
	for range n {
		free <- struct{}{}
	}
	for {
		for range n {
			select {
			case <-free:
			case <-ctx.Done():
				return
			}
		}
		// 20 s is the longest poll SQS allows and what consumers use: a
		// poll returns as soon as a message is there, and Close ends it.
		out, err := q.c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &q.url,
			MaxNumberOfMessages: int32(n), WaitTimeSeconds: 20})
		if err != nil {
			if ctx.Err() == nil {
				select {
				case q.errc <- err: // the first failure is enough to end the run
				default:
				}
			}
			return
		}
		for range n - len(out.Messages) {
			free <- struct{}{}
		}
		for _, m := range out.Messages {
			select {
			case q.msgs <- load.Msg{Body: []byte(aws.ToString(m.Body)), Handle: sqsHeld{m.ReceiptHandle, free}}:
			case <-ctx.Done():
				return // the run is over; undeleted messages come back after their visibility timeout
			}
		}
	}
}

func (q *sqsConsumer) Close() error {
	q.cancel()
	q.wg.Wait()
	return nil
}

func (q *sqsConsumer) Receive(ctx context.Context, limit int, wait time.Duration) ([]load.Msg, error) {
	return takePushed(ctx, q.msgs, q.errc, limit, wait)
}

// Ack deletes msgs, each by its own receipt, in DeleteMessageBatch calls of
// up to 10 sent at once, and gives each message's place back to its poller.
func (q *sqsConsumer) Ack(ctx context.Context, msgs []load.Msg) error {
	var wg sync.WaitGroup
	errs := make([]error, (len(msgs)+sqsMaxReceive-1)/sqsMaxReceive)
	for i := range errs {
		batch := msgs[i*sqsMaxReceive : min(len(msgs), (i+1)*sqsMaxReceive)]
		wg.Go(func() { errs[i] = deleteBatch(ctx, q.c, q.url, batch) })
	}
	wg.Wait()
	for _, m := range msgs {
		m.Handle.(sqsHeld).quota <- struct{}{}
	}
	return errors.Join(errs...)
}

// deleteBatch deletes up to 10 messages in one DeleteMessageBatch.
func deleteBatch(ctx context.Context, c *awssqs.Client, url string, msgs []load.Msg) error {
	entries := make([]types.DeleteMessageBatchRequestEntry, len(msgs))
	for i, m := range msgs {
		entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.Handle.(sqsHeld).receipt}
	}
	out, err := c.DeleteMessageBatch(ctx, &awssqs.DeleteMessageBatchInput{QueueUrl: &url, Entries: entries})
	if err != nil {
		return err
	}
	if len(out.Failed) > 0 {
		return fmt.Errorf("DeleteMessageBatch: %d failed: %s", len(out.Failed), aws.ToString(out.Failed[0].Message))
	}
	return nil
}

// rawSend is SendMessage as the JSON protocol's bare POST: what any SQS client must send,
// without the SDK's middleware, retries and signature, so a run with it tells the server's
// cost from aws-sdk-go-v2's.
func (s *sqsClient) rawSend(ctx context.Context, body []byte) error {
	payload, err := json.Marshal(struct {
		QueueUrl    string
		MessageBody string
	}{s.url, string(body)})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(payload))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "AmazonSQS.SendMessage")
	resp, err := s.raw.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("SendMessage: HTTP %d: %s", resp.StatusCode, answer)
	}
	return nil
}
