package sqs_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

const dlqArn = "arn:aws:sqs:us-east-1:000000000000:mt-dlq"

// deadLetter sends bodies to src and dead-letters them (maxReceiveCount 1:
// one receive, handed back, and the next receive moves them).
func (e *env) deadLetter(src string, bodies ...string) {
	e.t.Helper()
	for _, b := range bodies {
		if _, err := e.c.SendMessage(e.ctx, &awssqs.SendMessageInput{QueueUrl: &src, MessageBody: aws.String(b)}); err != nil {
			e.t.Fatal(err)
		}
	}
	out, err := e.c.ReceiveMessage(e.ctx, &awssqs.ReceiveMessageInput{QueueUrl: &src, MaxNumberOfMessages: 10})
	if err != nil || len(out.Messages) != len(bodies) {
		e.t.Fatalf("receive: %v %d", err, len(out.Messages))
	}
	for _, m := range out.Messages {
		if _, err := e.c.ChangeMessageVisibility(e.ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: &src, ReceiptHandle: m.ReceiptHandle}); err != nil {
			e.t.Fatal(err)
		}
	}
	if out, err := e.c.ReceiveMessage(e.ctx, &awssqs.ReceiveMessageInput{QueueUrl: &src, MaxNumberOfMessages: 10}); err != nil || len(out.Messages) != 0 {
		e.t.Fatalf("second receive: %v %d", err, len(out.Messages))
	}
}

func (e *env) moveQueues() (src, dlq string) {
	dlq = e.createQueue("mt-dlq", nil)
	src = e.createQueue("mt-src", map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"` + dlqArn + `","maxReceiveCount":1}`})
	return src, dlq
}

func TestMessageMoveTaskBackToSource(t *testing.T) {
	e := newEnv(t)
	src, dlq := e.moveQueues()
	e.deadLetter(src, "m1", "m2", "m3")
	e.wantDepth(dlq, 3, 0)
	start, err := e.c.StartMessageMoveTask(e.ctx, &awssqs.StartMessageMoveTaskInput{SourceArn: aws.String(dlqArn)})
	if err != nil {
		t.Fatal(err)
	}
	// The broker's own wait stands in for polling ListMessageMoveTasks.
	task, err := e.b.WaitRedrive(context.Background(), aws.ToString(start.TaskHandle))
	if err != nil || task.Moved != 3 {
		t.Fatalf("task %+v %v", task, err)
	}
	list, err := e.c.ListMessageMoveTasks(e.ctx, &awssqs.ListMessageMoveTasksInput{SourceArn: aws.String(dlqArn), MaxResults: aws.Int32(10)})
	if err != nil || len(list.Results) != 1 {
		t.Fatalf("list: %v %+v", err, list)
	}
	r := list.Results[0]
	if aws.ToString(r.Status) != "COMPLETED" || r.ApproximateNumberOfMessagesMoved != 3 || aws.ToString(r.SourceArn) != dlqArn || r.StartedTimestamp == 0 {
		t.Fatalf("result %+v", r)
	}
	e.wantDepth(dlq, 0, 0)
	out, err := e.c.ReceiveMessage(e.ctx, &awssqs.ReceiveMessageInput{QueueUrl: &src, MaxNumberOfMessages: 10,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
	if err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for _, m := range out.Messages {
		bodies = append(bodies, aws.ToString(m.Body))
		if arn, ok := m.Attributes["DeadLetterQueueSourceArn"]; ok {
			t.Errorf("a message back in its source names a dead-letter source: %s", arn)
		}
	}
	slices.Sort(bodies)
	if !slices.Equal(bodies, []string{"m1", "m2", "m3"}) {
		t.Fatalf("back in the source: %v", bodies)
	}
}

func TestMessageMoveTaskCancelAndErrors(t *testing.T) {
	e := newEnv(t)
	src, _ := e.moveQueues()
	var bodies []string
	for i := range 5 {
		bodies = append(bodies, "m"+strconv.Itoa(i))
	}
	e.deadLetter(src, bodies...)
	start, err := e.c.StartMessageMoveTask(e.ctx, &awssqs.StartMessageMoveTaskInput{SourceArn: aws.String(dlqArn),
		DestinationArn: aws.String("arn:aws:sqs:us-east-1:000000000000:mt-src"), MaxNumberOfMessagesPerSecond: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.c.StartMessageMoveTask(e.ctx, &awssqs.StartMessageMoveTaskInput{SourceArn: aws.String(dlqArn)})
	wantCode(t, err, "InvalidParameterValue") // one running task per source
	running, err := e.c.ListMessageMoveTasks(e.ctx, &awssqs.ListMessageMoveTasksInput{SourceArn: aws.String(dlqArn)})
	if err != nil || len(running.Results) != 1 || aws.ToString(running.Results[0].TaskHandle) != aws.ToString(start.TaskHandle) {
		t.Fatalf("running task: %v %+v", err, running.Results)
	}
	cancel, err := e.c.CancelMessageMoveTask(e.ctx, &awssqs.CancelMessageMoveTaskInput{TaskHandle: start.TaskHandle})
	if err != nil {
		t.Fatal(err)
	}
	if cancel.ApproximateNumberOfMessagesMoved >= 5 {
		t.Fatalf("a 1/s task moved %d of 5 before its cancel", cancel.ApproximateNumberOfMessagesMoved)
	}
	_, err = e.c.CancelMessageMoveTask(e.ctx, &awssqs.CancelMessageMoveTaskInput{TaskHandle: start.TaskHandle})
	wantCode(t, err, "InvalidParameterValue")
	_, err = e.c.CancelMessageMoveTask(e.ctx, &awssqs.CancelMessageMoveTaskInput{TaskHandle: aws.String("nope")})
	wantCode(t, err, "ResourceNotFoundException")
	var rnf *types.ResourceNotFoundException
	if err == nil || !errors.As(err, &rnf) {
		t.Errorf("error type %T", err)
	}
	_, err = e.c.StartMessageMoveTask(e.ctx, &awssqs.StartMessageMoveTaskInput{SourceArn: aws.String("arn:aws:sqs:us-east-1:000000000000:mt-src")})
	wantCode(t, err, "InvalidParameterValue") // not a dead-letter queue
	_, err = e.c.StartMessageMoveTask(e.ctx, &awssqs.StartMessageMoveTaskInput{SourceArn: aws.String("arn:aws:sqs:us-east-1:000000000000:none")})
	wantCode(t, err, "ResourceNotFoundException")
	_, err = e.c.StartMessageMoveTask(e.ctx, &awssqs.StartMessageMoveTaskInput{SourceArn: aws.String(dlqArn), MaxNumberOfMessagesPerSecond: aws.Int32(501)})
	wantCode(t, err, "InvalidParameterValue")
}
