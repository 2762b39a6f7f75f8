package sqs_test

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
	"net/http/httptrace"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

func strAttr(typ, v string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String(typ), StringValue: aws.String(v)}
}

// The digests below were computed outside Go (Python's hashlib and struct)
// with the algorithm the SDKs document, so they check this package's
// implementation rather than restate it.
const (
	md5OfTestAttrs = "f14bcffa6138bbe0f3bb4577b7235ffd"
	md5OfTrace     = "62a56dd927315f2b2e12832b84617ea5"
	traceHeader    = "Root=1-5759e988-bd862e3fe1be46a994272793"
)

func testAttrs() map[string]types.MessageAttributeValue {
	return map[string]types.MessageAttributeValue{
		"color": strAttr("String", "blue"),
		"count": strAttr("Number", "42"),
		"kind":  strAttr("String.custom", "x"),
		"blob":  {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 0xff}},
	}
}

func TestSendReceiveDeleteWithAttributes(t *testing.T) {
	sendReceiveDeleteWithAttributes(newEnv(t))
}

// sendReceiveDeleteWithAttributes sends with message, system and binary
// attributes (the SDK checks every MD5), receives, deletes, and deletes
// again with the now stale receipt.
func sendReceiveDeleteWithAttributes(e *env) {
	t := e.t
	url := e.createQueue("attrs", nil)
	sent, err := e.c.SendMessage(e.ctx, &awssqs.SendMessageInput{
		QueueUrl: &url, MessageBody: aws.String("charge order 101 ✓"),
		MessageAttributes: testAttrs(),
		MessageSystemAttributes: map[string]types.MessageSystemAttributeValue{
			"AWSTraceHeader": {DataType: aws.String("String"), StringValue: aws.String(traceHeader)},
		},
	})
	if err != nil {
		t.Fatal(err) // the SDK has already checked MD5OfMessageBody
	}
	if got := aws.ToString(sent.MD5OfMessageAttributes); got != md5OfTestAttrs {
		t.Errorf("MD5OfMessageAttributes = %s, want %s", got, md5OfTestAttrs)
	}
	if got := aws.ToString(sent.MD5OfMessageSystemAttributes); got != md5OfTrace {
		t.Errorf("MD5OfMessageSystemAttributes = %s, want %s", got, md5OfTrace)
	}
	out, err := e.c.ReceiveMessage(e.ctx, &awssqs.ReceiveMessageInput{QueueUrl: &url,
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Messages) != 1 {
		t.Fatalf("received %d messages, want 1", len(out.Messages))
	}
	m := out.Messages[0]
	if aws.ToString(m.MessageId) != aws.ToString(sent.MessageId) || aws.ToString(m.Body) != "charge order 101 ✓" {
		t.Fatalf("received %q %q", aws.ToString(m.MessageId), aws.ToString(m.Body))
	}
	if got := aws.ToString(m.MD5OfMessageAttributes); got != md5OfTestAttrs {
		t.Errorf("received MD5OfMessageAttributes = %s", got)
	}
	if b := m.MessageAttributes["blob"].BinaryValue; hex.EncodeToString(b) != "0001ff" {
		t.Errorf("binary attribute = %x", b)
	}
	if v := aws.ToString(m.MessageAttributes["kind"].DataType); v != "String.custom" {
		t.Errorf("custom type = %q", v)
	}
	a := m.Attributes
	if a["ApproximateReceiveCount"] != "1" || a["SenderId"] != "AKIDSLUICETEST" || a["AWSTraceHeader"] != traceHeader {
		t.Errorf("system attributes = %v", a)
	}
	sentAt, _ := strconv.ParseInt(a["SentTimestamp"], 10, 64)
	if d := time.Since(time.UnixMilli(sentAt)); d < 0 || d > time.Minute {
		t.Errorf("SentTimestamp %s is not recent", a["SentTimestamp"])
	}
	if _, err := e.c.DeleteMessage(e.ctx, &awssqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	// Deleting again with the same (now stale) receipt succeeds, as in SQS.
	if _, err := e.c.DeleteMessage(e.ctx, &awssqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle}); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	e.wantDepth(url, 0, 0)
}

// wantDepth checks ApproximateNumberOfMessages and …NotVisible.
func (e *env) wantDepth(url string, visible, inFlight int) {
	e.t.Helper()
	out, err := e.c.GetQueueAttributes(e.ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &url,
		AttributeNames: []types.QueueAttributeName{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"}})
	if err != nil {
		e.t.Fatal(err)
	}
	got := out.Attributes
	if got["ApproximateNumberOfMessages"] != strconv.Itoa(visible) || got["ApproximateNumberOfMessagesNotVisible"] != strconv.Itoa(inFlight) {
		e.t.Fatalf("depth = %v, want %d visible %d in flight", got, visible, inFlight)
	}
}

func TestMessageAttributeSelection(t *testing.T) {
	e := newEnv(t)
	url := e.createQueue("sel", nil)
	attrs := map[string]types.MessageAttributeValue{
		"order.id": strAttr("String", "1"), "order.total": strAttr("Number", "9.5"), "trace": strAttr("String", "t"),
	}
	for range 3 {
		if _, err := e.c.SendMessage(e.ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("b"), MessageAttributes: attrs}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		names []string
		want  int
	}{{[]string{"order.*"}, 2}, {[]string{"trace"}, 1}, {nil, 0}} {
		out, err := e.c.ReceiveMessage(e.ctx, &awssqs.ReceiveMessageInput{QueueUrl: &url, MessageAttributeNames: tc.names})
		if err != nil || len(out.Messages) != 1 {
			t.Fatalf("%v: %v %d", tc.names, err, len(out.Messages))
		}
		if got := len(out.Messages[0].MessageAttributes); got != tc.want {
			t.Errorf("%v selected %d attributes, want %d", tc.names, got, tc.want)
		}
		if tc.want == 0 && out.Messages[0].MD5OfMessageAttributes != nil {
			t.Errorf("MD5OfMessageAttributes without attributes")
		}
	}
}

func TestSendMessageBatchPartialFailure(t *testing.T) {
	e := newEnv(t)
	url := e.createQueue("batch", nil)
	out, err := e.c.SendMessageBatch(e.ctx, &awssqs.SendMessageBatchInput{QueueUrl: &url, Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("ok1"), MessageBody: aws.String("one")},
		{Id: aws.String("late"), MessageBody: aws.String("two"), DelaySeconds: 901},
		{Id: aws.String("badattr"), MessageBody: aws.String("three"), MessageAttributes: map[string]types.MessageAttributeValue{"n": strAttr("Number", "abc")}},
		{Id: aws.String("ok2"), MessageBody: aws.String("four"), MessageAttributes: testAttrs()},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Successful) != 2 || len(out.Failed) != 2 {
		t.Fatalf("successful %d failed %d", len(out.Successful), len(out.Failed))
	}
	for _, f := range out.Failed {
		if aws.ToString(f.Code) != "InvalidParameterValue" || !f.SenderFault {
			t.Errorf("failed entry %s: %s %v", aws.ToString(f.Id), aws.ToString(f.Code), f.SenderFault)
		}
	}
	for _, s := range out.Successful {
		if aws.ToString(s.Id) == "ok2" && aws.ToString(s.MD5OfMessageAttributes) != md5OfTestAttrs {
			t.Errorf("batch MD5OfMessageAttributes = %s", aws.ToString(s.MD5OfMessageAttributes))
		}
	}
	e.wantDepth(url, 2, 0)

	// Whole-request errors.
	_, err = e.c.SendMessageBatch(e.ctx, &awssqs.SendMessageBatchInput{QueueUrl: &url, Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("a"), MessageBody: aws.String("x")}, {Id: aws.String("a"), MessageBody: aws.String("y")}}})
	wantCode(t, err, "AWS.SimpleQueueService.BatchEntryIdsNotDistinct")
	var notDistinct *types.BatchEntryIdsNotDistinct
	if !errors.As(err, &notDistinct) {
		t.Errorf("error type %T, want *types.BatchEntryIdsNotDistinct", err)
	}
	_, err = e.c.SendMessageBatch(e.ctx, &awssqs.SendMessageBatchInput{QueueUrl: &url, Entries: []types.SendMessageBatchRequestEntry{}})
	wantCode(t, err, "AWS.SimpleQueueService.EmptyBatchRequest")
	many := make([]types.SendMessageBatchRequestEntry, 11)
	for i := range many {
		many[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String("x")}
	}
	_, err = e.c.SendMessageBatch(e.ctx, &awssqs.SendMessageBatchInput{QueueUrl: &url, Entries: many})
	wantCode(t, err, "AWS.SimpleQueueService.TooManyEntriesInBatchRequest")
	e.wantDepth(url, 2, 0)
}

// wantCode checks the error code an SDK user matches on.
func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T), want API error %s", err, err, code)
	}
	if ae.ErrorCode() != code {
		t.Fatalf("error code %s (%s), want %s", ae.ErrorCode(), ae.ErrorMessage(), code)
	}
}

func TestDeleteAndVisibilityBatches(t *testing.T) {
	e := newEnv(t)
	url := e.createQueue("vb", nil)
	for _, b := range []string{"a", "b", "c"} {
		if _, err := e.c.SendMessage(e.ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := e.c.ReceiveMessage(e.ctx, &awssqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10})
	if err != nil || len(out.Messages) != 3 {
		t.Fatalf("receive: %v, %d messages", err, len(out.Messages))
	}
	r := func(i int) *string { return out.Messages[i].ReceiptHandle }
	cv, err := e.c.ChangeMessageVisibilityBatch(e.ctx, &awssqs.ChangeMessageVisibilityBatchInput{QueueUrl: &url,
		Entries: []types.ChangeMessageVisibilityBatchRequestEntry{
			{Id: aws.String("back"), ReceiptHandle: r(0), VisibilityTimeout: 0},
			{Id: aws.String("keep"), ReceiptHandle: r(1), VisibilityTimeout: 600},
			{Id: aws.String("bogus"), ReceiptHandle: aws.String("not-a-receipt"), VisibilityTimeout: 5},
		}})
	if err != nil {
		t.Fatal(err)
	}
	if len(cv.Successful) != 2 || len(cv.Failed) != 1 || aws.ToString(cv.Failed[0].Code) != "ReceiptHandleIsInvalid" {
		t.Fatalf("visibility batch: %+v %+v", cv.Successful, cv.Failed)
	}
	e.wantDepth(url, 1, 2)
	del, err := e.c.DeleteMessageBatch(e.ctx, &awssqs.DeleteMessageBatchInput{QueueUrl: &url,
		Entries: []types.DeleteMessageBatchRequestEntry{
			{Id: aws.String("1"), ReceiptHandle: r(1)},
			{Id: aws.String("2"), ReceiptHandle: r(2)},
			{Id: aws.String("3"), ReceiptHandle: aws.String("garbage")},
			{Id: aws.String("4"), ReceiptHandle: r(1)}, // stale by now: succeeds, deletes nothing
		}})
	if err != nil {
		t.Fatal(err)
	}
	if len(del.Successful) != 3 || len(del.Failed) != 1 || aws.ToString(del.Failed[0].Id) != "3" {
		t.Fatalf("delete batch: %+v %+v", del.Successful, del.Failed)
	}
	e.wantDepth(url, 1, 0)
}

func TestChangeMessageVisibility(t *testing.T) {
	changeMessageVisibility(newEnv(t))
}

// changeMessageVisibility hands a message back, then checks
// MessageNotInflight, a stale receipt (refused, but accepted by
// DeleteMessage) and invalid receipts.
func changeMessageVisibility(e *env) {
	t := e.t
	url := e.createQueue("vis", nil)
	if _, err := e.c.SendMessage(e.ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("job")}); err != nil {
		t.Fatal(err)
	}
	first := e.receiveOne(url, 0)
	// Visibility 0: visible again at once, with the receipt still current.
	if _, err := e.c.ChangeMessageVisibility(e.ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: first.ReceiptHandle, VisibilityTimeout: 0}); err != nil {
		t.Fatal(err)
	}
	_, err := e.c.ChangeMessageVisibility(e.ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: first.ReceiptHandle, VisibilityTimeout: 30})
	wantCode(t, err, "AWS.SimpleQueueService.MessageNotInflight")
	second := e.receiveOne(url, 0)
	if second.Attributes["ApproximateReceiveCount"] != "2" {
		t.Errorf("receive count = %s", second.Attributes["ApproximateReceiveCount"])
	}
	// The first receipt is stale now: SQS refuses to change its visibility …
	_, err = e.c.ChangeMessageVisibility(e.ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: first.ReceiptHandle, VisibilityTimeout: 30})
	wantCode(t, err, "InvalidParameterValue")
	// … and accepts a delete with it, deleting nothing.
	if _, err := e.c.DeleteMessage(e.ctx, &awssqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: first.ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	e.wantDepth(url, 0, 1)
	_, err = e.c.ChangeMessageVisibility(e.ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: second.ReceiptHandle, VisibilityTimeout: 43201})
	wantCode(t, err, "InvalidParameterValue")
	_, err = e.c.ChangeMessageVisibility(e.ctx, &awssqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: aws.String("AAAA"), VisibilityTimeout: 1})
	wantCode(t, err, "ReceiptHandleIsInvalid")
	var rh *types.ReceiptHandleIsInvalid
	if !errors.As(err, &rh) {
		t.Errorf("error type %T", err)
	}
	_, err = e.c.DeleteMessage(e.ctx, &awssqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: aws.String("AAAA")})
	wantCode(t, err, "ReceiptHandleIsInvalid")
	if _, err := e.c.DeleteMessage(e.ctx, &awssqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: second.ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	e.wantDepth(url, 0, 0)
}

// receiveOne receives exactly one message, waiting up to wait seconds.
func (e *env) receiveOne(url string, wait int32) types.Message {
	e.t.Helper()
	out, err := e.c.ReceiveMessage(e.ctx, &awssqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: wait,
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
	if err != nil {
		e.t.Fatal(err)
	}
	if len(out.Messages) != 1 {
		e.t.Fatalf("received %d messages, want 1", len(out.Messages))
	}
	return out.Messages[0]
}

func TestLongPollWokenBySend(t *testing.T) {
	t.Parallel() // slow: real time or an external process
	longPollWokenBySend(newEnv(t))
}

// longPollWokenBySend checks that a send ends a 20-second ReceiveMessage wait.
func longPollWokenBySend(e *env) {
	t := e.t
	url := e.createQueue("poll", nil)
	got := make(chan types.Message, 1)
	errc := make(chan error, 1)
	wrote := make(chan struct{})
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { close(wrote) }}
	go func() {
		out, err := e.c.ReceiveMessage(httptrace.WithClientTrace(e.ctx, trace), &awssqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 20})
		if err != nil || len(out.Messages) != 1 {
			errc <- errors.Join(err, errors.New("long poll returned no message"))
			return
		}
		got <- out.Messages[0]
	}()
	// The send follows the poll's request onto the wire, so the poll is
	// almost always waiting when it lands; either way the send must reach
	// it well before its 20 s wait ends.
	select {
	case <-wrote:
	case err := <-errc:
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := e.c.SendMessage(e.ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("wake")}); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if aws.ToString(m.Body) != "wake" {
			t.Fatalf("body %q", aws.ToString(m.Body))
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("long poll answered after %v", d)
		}
	case err := <-errc:
		t.Fatal(err)
	}
}

func TestSendValidation(t *testing.T) {
	e := newEnv(t)
	url := e.createQueue("val", map[string]string{"MaximumMessageSize": "1024"})
	big := make([]byte, 1025)
	for i := range big {
		big[i] = 'x'
	}
	cases := []struct {
		name string
		in   awssqs.SendMessageInput
		code string
	}{
		{"empty body", awssqs.SendMessageInput{MessageBody: aws.String("")}, "MissingParameter"},
		{"control char", awssqs.SendMessageInput{MessageBody: aws.String("a\x00b")}, "InvalidMessageContents"},
		{"too long", awssqs.SendMessageInput{MessageBody: aws.String(string(big))}, "InvalidParameterValue"},
		{"delay", awssqs.SendMessageInput{MessageBody: aws.String("x"), DelaySeconds: 901}, "InvalidParameterValue"},
		{"dedup on standard", awssqs.SendMessageInput{MessageBody: aws.String("x"), MessageDeduplicationId: aws.String("d")}, "InvalidParameterValue"},
		{"reserved attr", awssqs.SendMessageInput{MessageBody: aws.String("x"), MessageAttributes: map[string]types.MessageAttributeValue{"AWS.x": strAttr("String", "v")}}, "InvalidParameterValue"},
		{"bad type", awssqs.SendMessageInput{MessageBody: aws.String("x"), MessageAttributes: map[string]types.MessageAttributeValue{"a": strAttr("Text", "v")}}, "InvalidParameterValue"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			in.QueueUrl = &url
			_, err := e.c.SendMessage(e.ctx, &in)
			wantCode(t, err, tc.code)
		})
	}
	e.wantDepth(url, 0, 0)
}

func TestReceiveValidation(t *testing.T) {
	e := newEnv(t)
	url := e.createQueue("rv", nil)
	for _, in := range []awssqs.ReceiveMessageInput{
		{MaxNumberOfMessages: 11}, {WaitTimeSeconds: 21}, {VisibilityTimeout: 43201},
		{MessageSystemAttributeNames: []types.MessageSystemAttributeName{"Bogus"}},
	} {
		in.QueueUrl = &url
		_, err := e.c.ReceiveMessage(e.ctx, &in)
		var ae smithy.APIError
		if !errors.As(err, &ae) || (ae.ErrorCode() != "InvalidParameterValue" && ae.ErrorCode() != "InvalidAttributeName") {
			t.Errorf("%+v: %v", in, err)
		}
	}
}

func TestBodyDigestIsMD5(t *testing.T) {
	// The SDK checks MD5OfBody itself; this pins that sluice sends the hex
	// MD5 of the UTF-8 body even for multi-byte text.
	e := newEnv(t)
	url := e.createQueue("md5", nil)
	body := "héllo, 世界 🚀"
	out, err := e.c.SendMessage(e.ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: &body})
	if err != nil {
		t.Fatal(err)
	}
	sum := md5.Sum([]byte(body))
	if aws.ToString(out.MD5OfMessageBody) != hex.EncodeToString(sum[:]) {
		t.Fatalf("MD5OfMessageBody %s", aws.ToString(out.MD5OfMessageBody))
	}
}
