package sqs_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/broker"
)

// TestSubscriptionOverSQS: a fan-out subscription is read, changed and
// deleted over SQS by its escaped name: records become messages (value as
// body, headers as attributes, "<partition>-<offset>" as id), a deleted one
// is not delivered again, and an unknown subscription is QueueDoesNotExist.
func TestSubscriptionOverSQS(t *testing.T) {
	e := newEnv(t)
	if _, err := e.b.CreateTopic(broker.TopicSettings{Name: "events", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.b.CreateSubscription(broker.SubscriptionSettings{Topic: "events", Name: "audit", FromEarliest: true}); err != nil {
		t.Fatal(err)
	}
	recs := []broker.ProduceRecord{
		{Value: []byte("first"), Headers: []batch.RecordHeader{{Key: "kind", Value: []byte("text")}, {Key: "raw", Value: []byte{0, 1, 2}}}},
		{Value: []byte("second")},
	}
	if _, err := e.b.Produce(e.ctx, "events", recs, broker.ProduceOptions{}); err != nil {
		t.Fatal(err)
	}
	u, err := e.c.GetQueueUrl(e.ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String("events/audit")})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(aws.ToString(u.QueueUrl), "/000000000000/events%2Faudit") {
		t.Fatalf("URL %q: want the subscription's name escaped in one segment", aws.ToString(u.QueueUrl))
	}
	out, err := e.c.ReceiveMessage(e.ctx, &awssqs.ReceiveMessageInput{QueueUrl: u.QueueUrl, MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"}})
	if err != nil || len(out.Messages) != 2 {
		t.Fatalf("receive: %v %v", out, err)
	}
	first := out.Messages[0]
	if aws.ToString(first.Body) != "first" || aws.ToString(first.MessageId) != "0-0" {
		t.Errorf("first message: body %q id %q", aws.ToString(first.Body), aws.ToString(first.MessageId))
	}
	if a := first.MessageAttributes["kind"]; aws.ToString(a.DataType) != "String" || aws.ToString(a.StringValue) != "text" {
		t.Errorf("header kind: %+v", a)
	}
	if a := first.MessageAttributes["raw"]; aws.ToString(a.DataType) != "Binary" || string(a.BinaryValue) != "\x00\x01\x02" {
		t.Errorf("a header that is not SQS text is Binary: %+v", a)
	}
	// Back into view at once, then deleted for good.
	if _, err := e.c.ChangeMessageVisibility(e.ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: u.QueueUrl,
		ReceiptHandle: out.Messages[1].ReceiptHandle, VisibilityTimeout: 0}); err != nil {
		t.Fatalf("change visibility: %v", err)
	}
	if _, err := e.c.DeleteMessage(e.ctx, &awssqs.DeleteMessageInput{QueueUrl: u.QueueUrl, ReceiptHandle: first.ReceiptHandle}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	again, err := e.c.ReceiveMessage(e.ctx, &awssqs.ReceiveMessageInput{QueueUrl: u.QueueUrl, MaxNumberOfMessages: 10})
	if err != nil || len(again.Messages) != 1 || aws.ToString(again.Messages[0].Body) != "second" {
		t.Fatalf("after delete and visibility 0: %v %v, want only the second", again, err)
	}
	del, err := e.c.DeleteMessageBatch(e.ctx, &awssqs.DeleteMessageBatchInput{QueueUrl: u.QueueUrl,
		Entries: []sqstypes.DeleteMessageBatchRequestEntry{{Id: aws.String("a"), ReceiptHandle: again.Messages[0].ReceiptHandle}}})
	if err != nil || len(del.Successful) != 1 {
		t.Fatalf("delete batch: %v %v", del, err)
	}
	if st, err := e.b.SubscriptionStats("events", "audit"); err != nil || st.Acked != 2 {
		t.Errorf("stats after two deletes: %+v %v", st, err)
	}

	_, err = e.c.ReceiveMessage(e.ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(e.endpoint + "/000000000000/events%2Fnope")})
	var qdne *sqstypes.QueueDoesNotExist
	if !errors.As(err, &qdne) {
		t.Errorf("unknown subscription: %v, want QueueDoesNotExist", err)
	}
	if _, err := e.c.GetQueueUrl(e.ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String("events/nope")}); !errors.As(err, &qdne) {
		t.Errorf("GetQueueUrl of an unknown subscription: %v, want QueueDoesNotExist", err)
	}
}
