// Package sdk126 drives sluice's SQS endpoint with aws-sdk-go-v2's
// service/sqs v1.26.0, the last release that speaks the query protocol. It
// is a module of its own (under testdata, so the main module's go test
// ./... skips it) because one module cannot require two versions of
// service/sqs. internal/sqs runs it with SLUICE_SQS_ENDPOINT set: against
// the handler on httptest (TestQueryProtocolGoSDK126) and against the SQS
// listener of the real `sluice serve` (TestRealBinary).
package sdk126

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

func client(t *testing.T) (*sqs.Client, context.Context) {
	endpoint := os.Getenv("SLUICE_SQS_ENDPOINT")
	if endpoint == "" {
		t.Skip("SLUICE_SQS_ENDPOINT is not set; internal/sqs's TestQueryProtocolGoSDK126 and TestRealBinary run this")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	c := sqs.New(sqs.Options{
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDQUERY", "secret", ""),
		BaseEndpoint:     aws.String(endpoint),
		RetryMaxAttempts: 1,
	})
	return c, ctx
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != code {
		t.Fatalf("error %v, want code %s", err, code)
	}
}

func TestQueryProtocol(t *testing.T) {
	c, ctx := client(t)
	q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("sdk126"),
		Attributes: map[string]string{"VisibilityTimeout": "40"}, Tags: map[string]string{"team": "core"}})
	if err != nil {
		t.Fatal(err)
	}
	url := q.QueueUrl
	attrs := map[string]types.MessageAttributeValue{
		"color": {DataType: aws.String("String"), StringValue: aws.String("blue")},
		"blob":  {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 0xff}},
	}
	sent, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: url, MessageBody: aws.String("héllo"), MessageAttributes: attrs})
	if err != nil {
		t.Fatal(err) // the SDK checks MD5OfMessageBody
	}
	batch, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: url, Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("ok"), MessageBody: aws.String("two")},
		{Id: aws.String("late"), MessageBody: aws.String("three"), DelaySeconds: 901},
	}})
	if err != nil || len(batch.Successful) != 1 || len(batch.Failed) != 1 || aws.ToString(batch.Failed[0].Code) != "InvalidParameterValue" {
		t.Fatalf("batch: %v %+v", err, batch)
	}
	got, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
		AttributeNames: []types.QueueAttributeName{"All"}, MessageAttributeNames: []string{"All"}})
	if err != nil || len(got.Messages) != 2 {
		t.Fatalf("receive: %v %d", err, len(got.Messages))
	}
	for _, m := range got.Messages {
		if aws.ToString(m.MessageId) == aws.ToString(sent.MessageId) {
			if aws.ToString(m.MD5OfMessageAttributes) != aws.ToString(sent.MD5OfMessageAttributes) ||
				string(m.MessageAttributes["blob"].BinaryValue) != "\x00\x01\xff" || m.Attributes["SenderId"] != "AKIDQUERY" {
				t.Fatalf("message %+v", m)
			}
		}
		if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: url, ReceiptHandle: m.ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
	}
	qa, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: url, AttributeNames: []types.QueueAttributeName{"All"}})
	if err != nil || qa.Attributes["VisibilityTimeout"] != "40" || qa.Attributes["ApproximateNumberOfMessages"] != "0" {
		t.Fatalf("attributes: %v %v", err, qa.Attributes)
	}
	tags, err := c.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: url})
	if err != nil || tags.Tags["team"] != "core" {
		t.Fatalf("tags: %v %v", err, tags.Tags)
	}
	list, err := c.ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: aws.String("sdk")})
	if err != nil || len(list.QueueUrls) != 1 {
		t.Fatalf("list: %v %v", err, list.QueueUrls)
	}

	_, err = c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("missing")})
	wantCode(t, err, "AWS.SimpleQueueService.NonExistentQueue")
	var missing *types.QueueDoesNotExist
	if !errors.As(err, &missing) {
		t.Errorf("error type %T, want *types.QueueDoesNotExist", err)
	}
	_, err = c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: url, ReceiptHandle: aws.String("bogus")})
	wantCode(t, err, "ReceiptHandleIsInvalid")
	_, err = c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: url, Entries: []types.SendMessageBatchRequestEntry{}})
	wantCode(t, err, "AWS.SimpleQueueService.EmptyBatchRequest")
	if _, err := c.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: url}); err != nil {
		t.Fatal(err)
	}
}

func TestQueryProtocolMoveTasks(t *testing.T) {
	c, ctx := client(t)
	dlq, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("sdk126-dlq")})
	if err != nil {
		t.Fatal(err)
	}
	arn := "arn:aws:sqs:us-east-1:000000000000:sdk126-dlq"
	src, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("sdk126-src"),
		Attributes: map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"` + arn + `","maxReceiveCount":1}`}})
	if err != nil {
		t.Fatal(err)
	}
	srcs, err := c.ListDeadLetterSourceQueues(ctx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: dlq.QueueUrl})
	if err != nil || len(srcs.QueueUrls) != 1 || srcs.QueueUrls[0] != aws.ToString(src.QueueUrl) {
		t.Fatalf("dead-letter sources: %v %v", err, srcs.QueueUrls)
	}
	start, err := c.StartMessageMoveTask(ctx, &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(arn)})
	if err != nil || aws.ToString(start.TaskHandle) == "" {
		t.Fatalf("start: %v", err)
	}
	tasks, err := c.ListMessageMoveTasks(ctx, &sqs.ListMessageMoveTasksInput{SourceArn: aws.String(arn), MaxResults: 10})
	if err != nil || len(tasks.Results) != 1 || aws.ToString(tasks.Results[0].SourceArn) != arn {
		t.Fatalf("list tasks: %v %+v", err, tasks)
	}
}
