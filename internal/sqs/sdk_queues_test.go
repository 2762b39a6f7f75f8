package sqs_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

func TestQueueLifecycle(t *testing.T) {
	e := newEnv(t)
	url := e.createQueue("lifecycle", nil)
	if want := e.endpoint + "/000000000000/lifecycle"; url != want {
		t.Fatalf("queue URL %s, want %s", url, want)
	}
	// CreateQueue is idempotent with the same attributes …
	if again := e.createQueue("lifecycle", nil); again != url {
		t.Fatalf("second create: %s", again)
	}
	// … and refuses different ones.
	_, err := e.c.CreateQueue(e.ctx, &awssqs.CreateQueueInput{QueueName: aws.String("lifecycle"),
		Attributes: map[string]string{"VisibilityTimeout": "99"}})
	wantCode(t, err, "QueueAlreadyExists")
	var exists *types.QueueNameExists
	if !errors.As(err, &exists) {
		t.Errorf("error type %T", err)
	}
	got, err := e.c.GetQueueUrl(e.ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String("lifecycle")})
	if err != nil || aws.ToString(got.QueueUrl) != url {
		t.Fatalf("GetQueueUrl: %v %v", err, aws.ToString(got.QueueUrl))
	}
	if _, err := e.c.DeleteQueue(e.ctx, &awssqs.DeleteQueueInput{QueueUrl: &url}); err != nil {
		t.Fatal(err)
	}
	_, err = e.c.GetQueueUrl(e.ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String("lifecycle")})
	wantCode(t, err, "AWS.SimpleQueueService.NonExistentQueue")
	var missing *types.QueueDoesNotExist
	if !errors.As(err, &missing) {
		t.Errorf("error type %T, want *types.QueueDoesNotExist", err)
	}
	_, err = e.c.SendMessage(e.ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("x")})
	wantCode(t, err, "AWS.SimpleQueueService.NonExistentQueue")
}

func TestCreateQueueValidation(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		name  string
		attrs map[string]string
		code  string
	}{
		{"bad name!", nil, "InvalidParameterValue"},
		{strings.Repeat("n", 81), nil, "InvalidParameterValue"},
		{"nofifo", map[string]string{"FifoQueue": "true"}, "InvalidParameterValue"},
		{"v", map[string]string{"VisibilityTimeout": "43201"}, "InvalidAttributeValue"},
		{"r", map[string]string{"MessageRetentionPeriod": "59"}, "InvalidAttributeValue"},
		{"r2", map[string]string{"MessageRetentionPeriod": "1209601"}, "InvalidAttributeValue"},
		{"d", map[string]string{"DelaySeconds": "901"}, "InvalidAttributeValue"},
		{"w", map[string]string{"ReceiveMessageWaitTimeSeconds": "21"}, "InvalidAttributeValue"},
		{"m", map[string]string{"MaximumMessageSize": "1023"}, "InvalidAttributeValue"},
		{"m2", map[string]string{"MaximumMessageSize": "1048577"}, "InvalidAttributeValue"},
		{"u", map[string]string{"Colour": "blue"}, "InvalidAttributeName"},
		{"cbd", map[string]string{"ContentBasedDeduplication": "true"}, "InvalidAttributeName"},
		{"ro", map[string]string{"QueueArn": "arn:aws:sqs:us-east-1:000000000000:ro"}, "InvalidAttributeName"},
		{"rp", map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:none","maxReceiveCount":3}`}, "InvalidParameterValue"},
		{"rp2", map[string]string{"RedrivePolicy": `not json`}, "InvalidParameterValue"},
		{"rap", map[string]string{"RedriveAllowPolicy": `{"redrivePermission":"sometimes"}`}, "InvalidAttributeValue"},
	}
	for _, tc := range cases {
		_, err := e.c.CreateQueue(e.ctx, &awssqs.CreateQueueInput{QueueName: aws.String(tc.name), Attributes: tc.attrs})
		t.Run(tc.name[:min(len(tc.name), 10)], func(t *testing.T) { wantCode(t, err, tc.code) })
	}
	list, err := e.c.ListQueues(e.ctx, &awssqs.ListQueuesInput{})
	if err != nil || len(list.QueueUrls) != 0 {
		t.Fatalf("refused creates left queues: %v %v", list.QueueUrls, err)
	}
}

func TestQueueAttributes(t *testing.T) {
	e := newEnv(t)
	dlq := e.createQueue("attrs-dlq", nil)
	url := e.createQueue("attrs", map[string]string{
		"VisibilityTimeout": "45", "MessageRetentionPeriod": "3600", "DelaySeconds": "5",
		"ReceiveMessageWaitTimeSeconds": "2", "MaximumMessageSize": "2048",
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:attrs-dlq","maxReceiveCount":"4"}`,
		"Policy":        `{"Version":"2012-10-17"}`, "KmsMasterKeyId": "alias/aws/sqs",
	})
	out, err := e.c.GetQueueAttributes(e.ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []types.QueueAttributeName{"All"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"VisibilityTimeout": "45", "MessageRetentionPeriod": "3600", "DelaySeconds": "5",
		"ReceiveMessageWaitTimeSeconds": "2", "MaximumMessageSize": "2048",
		"QueueArn":      "arn:aws:sqs:us-east-1:000000000000:attrs",
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:attrs-dlq","maxReceiveCount":4}`,
		"Policy":        `{"Version":"2012-10-17"}`, "KmsMasterKeyId": "alias/aws/sqs",
		"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0", "ApproximateNumberOfMessagesDelayed": "0",
	}
	for k, v := range want {
		if out.Attributes[k] != v {
			t.Errorf("%s = %q, want %q", k, out.Attributes[k], v)
		}
	}
	for _, k := range []string{"CreatedTimestamp", "LastModifiedTimestamp"} {
		if len(out.Attributes[k]) != 10 {
			t.Errorf("%s = %q, want seconds since the epoch", k, out.Attributes[k])
		}
	}
	if _, ok := out.Attributes["FifoQueue"]; ok {
		t.Errorf("standard queue reports FifoQueue")
	}
	// Defaults.
	plain := e.createQueue("plain", nil)
	out, err = e.c.GetQueueAttributes(e.ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &plain, AttributeNames: []types.QueueAttributeName{"VisibilityTimeout", "MessageRetentionPeriod", "DelaySeconds", "MaximumMessageSize", "ReceiveMessageWaitTimeSeconds"}})
	if err != nil {
		t.Fatal(err)
	}
	defaults := map[string]string{"VisibilityTimeout": "30", "MessageRetentionPeriod": "345600", "DelaySeconds": "0", "MaximumMessageSize": "1048576", "ReceiveMessageWaitTimeSeconds": "0"}
	if fmt.Sprint(out.Attributes) != fmt.Sprint(defaults) {
		t.Errorf("defaults %v, want %v", out.Attributes, defaults)
	}
	// Set, then remove the redrive policy; a bad value changes nothing.
	_, err = e.c.SetQueueAttributes(e.ctx, &awssqs.SetQueueAttributesInput{QueueUrl: &url, Attributes: map[string]string{"VisibilityTimeout": "0", "RedrivePolicy": ""}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.c.SetQueueAttributes(e.ctx, &awssqs.SetQueueAttributesInput{QueueUrl: &url, Attributes: map[string]string{"DelaySeconds": "7", "VisibilityTimeout": "-1"}})
	wantCode(t, err, "InvalidAttributeValue")
	out, err = e.c.GetQueueAttributes(e.ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []types.QueueAttributeName{"All"}})
	if err != nil {
		t.Fatal(err)
	}
	if out.Attributes["VisibilityTimeout"] != "0" || out.Attributes["DelaySeconds"] != "5" || out.Attributes["RedrivePolicy"] != "" {
		t.Errorf("after set: %v", out.Attributes)
	}
	_, err = e.c.GetQueueAttributes(e.ctx, &awssqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []types.QueueAttributeName{"Nope"}})
	wantCode(t, err, "InvalidAttributeName")
	_ = dlq
}

func TestListQueuesPagination(t *testing.T) {
	e := newEnv(t)
	var want []string
	for i := range 7 {
		want = append(want, e.createQueue(fmt.Sprintf("page-%d", i), nil))
	}
	e.createQueue("other", nil)
	var got []string
	var token *string
	for range 10 {
		out, err := e.c.ListQueues(e.ctx, &awssqs.ListQueuesInput{QueueNamePrefix: aws.String("page-"), MaxResults: aws.Int32(3), NextToken: token})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, out.QueueUrls...)
		if token = out.NextToken; token == nil {
			break
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged %v, want %v", got, want)
	}
	all, err := e.c.ListQueues(e.ctx, &awssqs.ListQueuesInput{})
	if err != nil || len(all.QueueUrls) != 8 || all.NextToken != nil {
		t.Fatalf("list all: %v %d %v", err, len(all.QueueUrls), all.NextToken)
	}
	_, err = e.c.ListQueues(e.ctx, &awssqs.ListQueuesInput{MaxResults: aws.Int32(1001)})
	wantCode(t, err, "InvalidParameterValue")
}

func TestTagsAndPermissions(t *testing.T) {
	e := newEnv(t)
	out, err := e.c.CreateQueue(e.ctx, &awssqs.CreateQueueInput{QueueName: aws.String("tagged"), Tags: map[string]string{"team": "payments"}})
	if err != nil {
		t.Fatal(err)
	}
	url := aws.ToString(out.QueueUrl)
	if _, err := e.c.TagQueue(e.ctx, &awssqs.TagQueueInput{QueueUrl: &url, Tags: map[string]string{"env": "test", "tier": "1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.UntagQueue(e.ctx, &awssqs.UntagQueueInput{QueueUrl: &url, TagKeys: []string{"tier"}}); err != nil {
		t.Fatal(err)
	}
	tags, err := e.c.ListQueueTags(e.ctx, &awssqs.ListQueueTagsInput{QueueUrl: &url})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(tags.Tags) != "map[env:test team:payments]" {
		t.Fatalf("tags %v", tags.Tags)
	}
	if _, err := e.c.AddPermission(e.ctx, &awssqs.AddPermissionInput{QueueUrl: &url, Label: aws.String("p1"),
		AWSAccountIds: []string{"111122223333"}, Actions: []string{"SendMessage"}}); err != nil {
		t.Fatal(err)
	}
	_, err = e.c.AddPermission(e.ctx, &awssqs.AddPermissionInput{QueueUrl: &url, Label: aws.String("p1"),
		AWSAccountIds: []string{"111122223333"}, Actions: []string{"SendMessage"}})
	wantCode(t, err, "InvalidParameterValue")
	if _, err := e.c.RemovePermission(e.ctx, &awssqs.RemovePermissionInput{QueueUrl: &url, Label: aws.String("p1")}); err != nil {
		t.Fatal(err)
	}
	_, err = e.c.RemovePermission(e.ctx, &awssqs.RemovePermissionInput{QueueUrl: &url, Label: aws.String("p1")})
	wantCode(t, err, "InvalidParameterValue")
}

func TestPurgeQueue(t *testing.T) {
	e := newEnv(t)
	url := e.createQueue("purge", nil)
	for range 3 {
		if _, err := e.c.SendMessage(e.ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("x")}); err != nil {
			t.Fatal(err)
		}
	}
	m := e.receiveOne(url, 0)
	if _, err := e.c.PurgeQueue(e.ctx, &awssqs.PurgeQueueInput{QueueUrl: &url}); err != nil {
		t.Fatal(err)
	}
	e.wantDepth(url, 0, 0)
	// The purged in-flight message's receipt is stale: delete still succeeds.
	if _, err := e.c.DeleteMessage(e.ctx, &awssqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
}
