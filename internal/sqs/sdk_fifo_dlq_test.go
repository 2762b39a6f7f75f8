package sqs_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

func (e *env) sendFIFO(url, body, group, dedup string) *awssqs.SendMessageOutput {
	e.t.Helper()
	in := &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: &body, MessageGroupId: &group}
	if dedup != "" {
		in.MessageDeduplicationId = &dedup
	}
	out, err := e.c.SendMessage(e.ctx, in)
	if err != nil {
		e.t.Fatalf("send %s: %v", body, err)
	}
	return out
}

func (e *env) receiveBodies(url string, max int32) ([]string, []types.Message) {
	e.t.Helper()
	out, err := e.c.ReceiveMessage(e.ctx, &awssqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: max,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
	if err != nil {
		e.t.Fatal(err)
	}
	var bodies []string
	for _, m := range out.Messages {
		bodies = append(bodies, aws.ToString(m.Body))
	}
	return bodies, out.Messages
}

func TestFIFOGroupsAndDedup(t *testing.T) {
	fifoGroupsAndDedup(newEnv(t))
}

// fifoGroupsAndDedup checks FIFO group blocking, deduplication and send rules.
func fifoGroupsAndDedup(e *env) {
	t := e.t
	url := e.createQueue("jobs.fifo", map[string]string{"FifoQueue": "true"})
	first := e.sendFIFO(url, "a1", "A", "d-a1")
	if first.SequenceNumber == nil {
		t.Fatalf("FIFO send without SequenceNumber")
	}
	e.sendFIFO(url, "b1", "B", "d-b1")
	e.sendFIFO(url, "a2", "A", "d-a2")
	// A retry with the same deduplication id is accepted and dropped.
	if dup := e.sendFIFO(url, "a1 again", "A", "d-a1"); aws.ToString(dup.MessageId) != aws.ToString(first.MessageId) {
		t.Fatalf("duplicate got id %s, want %s", aws.ToString(dup.MessageId), aws.ToString(first.MessageId))
	}
	bodies, msgs := e.receiveBodies(url, 10)
	if slices.Contains(bodies, "a2") || !slices.Contains(bodies, "a1") || !slices.Contains(bodies, "b1") {
		t.Fatalf("first receive %v: want a1 and b1, and a2 held behind a1", bodies)
	}
	for _, m := range msgs {
		a := m.Attributes
		if a["MessageGroupId"] == "" || a["MessageDeduplicationId"] == "" || a["SequenceNumber"] == "" {
			t.Errorf("FIFO system attributes missing: %v", a)
		}
	}
	// Group A stays blocked while a1 is in flight.
	if more, _ := e.receiveBodies(url, 10); len(more) != 0 {
		t.Fatalf("received %v while groups are in flight", more)
	}
	for _, m := range msgs {
		if aws.ToString(m.Body) == "a1" {
			if _, err := e.c.DeleteMessage(e.ctx, &awssqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if next, _ := e.receiveBodies(url, 10); !slices.Equal(next, []string{"a2"}) {
		t.Fatalf("after deleting a1: %v, want [a2]", next)
	}

	// Send rules of FIFO queues.
	_, err := e.c.SendMessage(e.ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("x"), MessageDeduplicationId: aws.String("x")})
	wantCode(t, err, "MissingParameter")
	_, err = e.c.SendMessage(e.ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("x"), MessageGroupId: aws.String("g")})
	wantCode(t, err, "InvalidParameterValue")
	_, err = e.c.SendMessage(e.ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("x"), MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String("y"), DelaySeconds: 3})
	wantCode(t, err, "InvalidParameterValue")
}

func TestFIFOContentBasedDedup(t *testing.T) {
	e := newEnv(t)
	url := e.createQueue("cbd.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"})
	a := e.sendFIFO(url, "same", "g", "")
	b := e.sendFIFO(url, "same", "g", "")
	if aws.ToString(a.MessageId) != aws.ToString(b.MessageId) {
		t.Fatalf("content-based dedup kept both: %s %s", aws.ToString(a.MessageId), aws.ToString(b.MessageId))
	}
	e.wantDepth(url, 1, 0)
	out, err := e.c.GetQueueAttributes(e.ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []types.QueueAttributeName{"All"}})
	if err != nil {
		t.Fatal(err)
	}
	if out.Attributes["FifoQueue"] != "true" || out.Attributes["ContentBasedDeduplication"] != "true" {
		t.Fatalf("FIFO attributes %v", out.Attributes)
	}
	_, err = e.c.SetQueueAttributes(e.ctx, &awssqs.SetQueueAttributesInput{QueueUrl: &url, Attributes: map[string]string{"FifoQueue": "false"}})
	wantCode(t, err, "InvalidAttributeName")
}

func TestRedrivePolicyDeadLetters(t *testing.T) {
	redrivePolicyDeadLetters(newEnv(t))
}

// redrivePolicyDeadLetters creates a queue with a RedrivePolicy, dead-letters
// a message with attributes after maxReceiveCount receives and checks
// ListDeadLetterSourceQueues.
func redrivePolicyDeadLetters(e *env) {
	t := e.t
	dlq := e.createQueue("work-dlq", nil)
	url := e.createQueue("work", map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:work-dlq","maxReceiveCount":2}`})
	sent, err := e.c.SendMessage(e.ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("poison"),
		MessageAttributes: map[string]types.MessageAttributeValue{"k": strAttr("String", "v")}})
	if err != nil {
		t.Fatal(err)
	}
	for attempt := 1; attempt <= 2; attempt++ {
		out, err := e.c.ReceiveMessage(e.ctx, &awssqs.ReceiveMessageInput{QueueUrl: &url,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{"ApproximateReceiveCount"}})
		if err != nil || len(out.Messages) != 1 {
			t.Fatalf("attempt %d: %v %d", attempt, err, len(out.Messages))
		}
		if got := out.Messages[0].Attributes["ApproximateReceiveCount"]; got != fmt.Sprint(attempt) {
			t.Fatalf("attempt %d: receive count %s", attempt, got)
		}
		// A consumer that fails at once hands the message straight back.
		_, err = e.c.ChangeMessageVisibility(e.ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: &url,
			ReceiptHandle: out.Messages[0].ReceiptHandle, VisibilityTimeout: 0})
		if err != nil {
			t.Fatal(err)
		}
	}
	if bodies, _ := e.receiveBodies(url, 10); len(bodies) != 0 {
		t.Fatalf("third receive got %v; want the message dead-lettered", bodies)
	}
	m := e.receiveOne(dlq, 0)
	if aws.ToString(m.MessageId) != aws.ToString(sent.MessageId) || aws.ToString(m.Body) != "poison" {
		t.Fatalf("dead letter %s %q", aws.ToString(m.MessageId), aws.ToString(m.Body))
	}
	if src := m.Attributes["DeadLetterQueueSourceArn"]; src != "arn:aws:sqs:us-east-1:000000000000:work" {
		t.Fatalf("DeadLetterQueueSourceArn = %q", src)
	}
	if aws.ToString(m.MessageAttributes["k"].StringValue) != "v" {
		t.Fatalf("dead letter lost its attributes: %v", m.MessageAttributes)
	}
	srcs, err := e.c.ListDeadLetterSourceQueues(e.ctx, &awssqs.ListDeadLetterSourceQueuesInput{QueueUrl: &dlq})
	if err != nil || !slices.Equal(srcs.QueueUrls, []string{url}) {
		t.Fatalf("ListDeadLetterSourceQueues: %v %v", srcs.QueueUrls, err)
	}
	// A dead-letter target in use cannot be deleted (see docs/sqs.md).
	_, err = e.c.DeleteQueue(e.ctx, &awssqs.DeleteQueueInput{QueueUrl: &dlq})
	wantCode(t, err, "InvalidParameterValue")
}

func TestSeedWorkQueueTrace(t *testing.T) {
	t.Parallel() // slow: real time or an external process
	seedWorkQueueTrace(newEnv(t))
}

// seedWorkQueueTrace runs the seed's step-3 scenario through the SDK with a
// 2-second visibility timeout: m1's consumer crashes once, m2 always fails
// and reaches the dead-letter queue after 3 receives, m3 succeeds. Long
// polls wake when a visibility timeout ends, so the test waits on the
// broker, not on sleeps.
func seedWorkQueueTrace(e *env) {
	t := e.t
	dlq := e.createQueue("orders-dlq", nil)
	url := e.createQueue("orders", map[string]string{"VisibilityTimeout": "2",
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:orders-dlq","maxReceiveCount":3}`})
	names := map[string]string{"charge order 101": "m1", "corrupt payload": "m2", "charge order 103": "m3"}
	for _, body := range []string{"charge order 101", "corrupt payload", "charge order 103"} {
		if _, err := e.c.SendMessage(e.ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
	}
	var trace []string
	crashed := false
	for step := 0; step < 20 && len(trace) < 6; step++ {
		out, err := e.c.ReceiveMessage(e.ctx, &awssqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 5,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{"ApproximateReceiveCount"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			id := names[aws.ToString(m.Body)]
			switch {
			case id == "m1" && !crashed:
				crashed = true
				trace = append(trace, "m1 received, consumer crashes")
			case id == "m2":
				trace = append(trace, "m2 fails, attempt "+m.Attributes["ApproximateReceiveCount"])
			default:
				_, err := e.c.DeleteMessage(e.ctx, &awssqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle})
				trace = append(trace, fmt.Sprintf("%s done, deleted %t", id, err == nil))
			}
		}
	}
	want := []string{
		"m1 received, consumer crashes", "m2 fails, attempt 1", "m3 done, deleted true",
		"m1 done, deleted true", "m2 fails, attempt 2", "m2 fails, attempt 3",
	}
	if !slices.Equal(trace, want) {
		t.Fatalf("trace:\n%q\nwant:\n%q", trace, want)
	}
	// As in SQS, the move to the dead-letter queue happens on the receive
	// that finds m2 visible again with its receives used up.
	out, err := e.c.ReceiveMessage(e.ctx, &awssqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 3})
	if err != nil || len(out.Messages) != 0 {
		t.Fatalf("receive after the trace: %v %d", err, len(out.Messages))
	}
	m := e.receiveOne(dlq, 0)
	if aws.ToString(m.Body) != "corrupt payload" || m.Attributes["DeadLetterQueueSourceArn"] == "" {
		t.Fatalf("dead letter %q %v", aws.ToString(m.Body), m.Attributes)
	}
	e.wantDepth(url, 0, 0)
}

func TestFIFOReceiveRequestAttemptID(t *testing.T) {
	e := newEnv(t)
	url := e.createQueue("retry.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"})
	e.sendFIFO(url, "m1", "g1", "")
	e.sendFIFO(url, "m2", "g2", "")
	receive := func(attempt string) []types.Message {
		out, err := e.c.ReceiveMessage(e.ctx, &awssqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 1, ReceiveRequestAttemptId: aws.String(attempt)})
		if err != nil {
			t.Fatal(err)
		}
		return out.Messages
	}
	first := receive("attempt-1")
	retry := receive("attempt-1")
	if len(first) != 1 || len(retry) != 1 || aws.ToString(retry[0].ReceiptHandle) != aws.ToString(first[0].ReceiptHandle) {
		t.Fatalf("retry answered %v, want the first answer %v", retry, first)
	}
	other := receive("attempt-2")
	if len(other) != 1 || aws.ToString(other[0].Body) == aws.ToString(first[0].Body) {
		t.Fatalf("a new attempt id got %v", other)
	}
	if _, err := e.c.DeleteMessage(e.ctx, &awssqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: first[0].ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	// Its message is gone, so a retry of attempt-1 is a fresh receive (and
	// both groups are in flight or empty now).
	if again := receive("attempt-1"); len(again) != 0 {
		t.Fatalf("retry after delete got %v", again)
	}
}

func TestFIFODuplicateInsideBatch(t *testing.T) {
	e := newEnv(t)
	url := e.createQueue("d.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"})
	out, err := e.c.SendMessageBatch(e.ctx, &awssqs.SendMessageBatchInput{QueueUrl: &url, Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("a"), MessageBody: aws.String("x"), MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String("same")},
		{Id: aws.String("b"), MessageBody: aws.String("y"), MessageGroupId: aws.String("g"), MessageDeduplicationId: aws.String("same")},
		{Id: aws.String("c"), MessageBody: aws.String("z"), MessageGroupId: aws.String("g")},
		{Id: aws.String("d"), MessageBody: aws.String("z"), MessageGroupId: aws.String("g")},
	}})
	if err != nil || len(out.Successful) != 4 {
		t.Fatalf("%v %+v", err, out)
	}
	ids := map[string]string{}
	for _, s := range out.Successful {
		ids[aws.ToString(s.Id)] = aws.ToString(s.MessageId)
	}
	if ids["a"] != ids["b"] || ids["c"] != ids["d"] || ids["a"] == ids["c"] {
		t.Fatalf("message ids %v", ids)
	}
	e.wantDepth(url, 2, 0)
}

// High-throughput FIFO (DeduplicationScope=messageGroup,
// FifoThroughputLimit=perMessageGroupId): the same deduplication id in two
// groups is two messages, not one silently merged away. perMessageGroupId
// without messageGroup scope is refused, as SQS refuses it.
func TestFIFODeduplicationScopeMessageGroup(t *testing.T) {
	e := newEnv(t)
	url := e.createQueue("high.fifo", map[string]string{"FifoQueue": "true",
		"DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"})
	first := e.sendFIFO(url, "in a", "a", "order-7")
	second := e.sendFIFO(url, "in b", "b", "order-7")
	if aws.ToString(first.MessageId) == aws.ToString(second.MessageId) {
		t.Fatal("the same dedup id in two groups got one message id")
	}
	e.sendFIFO(url, "a again", "a", "order-7") // a duplicate within group a
	bodies, _ := e.receiveBodies(url, 10)
	slices.Sort(bodies)
	if !slices.Equal(bodies, []string{"in a", "in b"}) {
		t.Fatalf("received %q, want one message per group", bodies)
	}
	attrs, err := e.c.GetQueueAttributes(e.ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &url,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
	if err != nil {
		t.Fatal(err)
	}
	if a := attrs.Attributes; a["DeduplicationScope"] != "messageGroup" || a["FifoThroughputLimit"] != "perMessageGroupId" {
		t.Fatalf("attributes %v", a)
	}
	_, err = e.c.SetQueueAttributes(e.ctx, &awssqs.SetQueueAttributesInput{QueueUrl: &url,
		Attributes: map[string]string{"DeduplicationScope": "queue"}})
	if err == nil || !strings.Contains(err.Error(), "InvalidAttributeValue") {
		t.Fatalf("queue scope with perMessageGroupId: %v, want InvalidAttributeValue", err)
	}
	_, err = e.c.SetQueueAttributes(e.ctx, &awssqs.SetQueueAttributesInput{QueueUrl: &url,
		Attributes: map[string]string{"DeduplicationScope": "queue", "FifoThroughputLimit": "perQueue"}})
	if err != nil {
		t.Fatalf("back to normal throughput: %v", err)
	}
	e.sendFIFO(url, "in c", "c", "order-7") // now a duplicate queue-wide
	e.sendFIFO(url, "fresh", "c", "order-8")
	bodies, _ = e.receiveBodies(url, 10)
	if !slices.Equal(bodies, []string{"fresh"}) {
		t.Fatalf("with queue scope: received %q, want only the fresh id", bodies)
	}
}
