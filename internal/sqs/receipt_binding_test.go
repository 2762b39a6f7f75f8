package sqs_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// A receipt handle of one queue is ReceiptHandleIsInvalid on another, for
// every action that takes one, and deletes nothing there. Receipts used to
// be the same for the same message index of every queue, so a
// DeleteMessage on the wrong queue URL deleted that queue's message.
func TestReceiptHandleOfAnotherQueueIsInvalid(t *testing.T) {
	e := newEnv(t)
	a, b := e.createQueue("a", nil), e.createQueue("b", nil)
	for _, url := range []string{a, b} {
		if _, err := e.c.SendMessage(e.ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("job")}); err != nil {
			t.Fatal(err)
		}
	}
	ma, mb := e.receiveOne(a, 0), e.receiveOne(b, 0)
	if aws.ToString(ma.ReceiptHandle) == aws.ToString(mb.ReceiptHandle) {
		t.Fatalf("both queues handed out %q", aws.ToString(ma.ReceiptHandle))
	}
	_, err := e.c.DeleteMessage(e.ctx, &awssqs.DeleteMessageInput{QueueUrl: &b, ReceiptHandle: ma.ReceiptHandle})
	wantCode(t, err, "ReceiptHandleIsInvalid")
	_, err = e.c.ChangeMessageVisibility(e.ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: &b, ReceiptHandle: ma.ReceiptHandle, VisibilityTimeout: 0})
	wantCode(t, err, "ReceiptHandleIsInvalid")
	out, err := e.c.DeleteMessageBatch(e.ctx, &awssqs.DeleteMessageBatchInput{QueueUrl: &b,
		Entries: []types.DeleteMessageBatchRequestEntry{{Id: aws.String("1"), ReceiptHandle: ma.ReceiptHandle}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Failed) != 1 || aws.ToString(out.Failed[0].Code) != "ReceiptHandleIsInvalid" {
		t.Fatalf("batch delete: %+v", out)
	}
	e.wantDepth(b, 0, 1) // b's message is still in flight, not deleted
	for _, m := range []struct {
		url string
		msg types.Message
	}{{a, ma}, {b, mb}} {
		if _, err := e.c.DeleteMessage(e.ctx, &awssqs.DeleteMessageInput{QueueUrl: &m.url, ReceiptHandle: m.msg.ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
		e.wantDepth(m.url, 0, 0)
	}
}
