package sqs_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

func TestSmoke(t *testing.T) {
	e := newEnv(t)
	url := e.createQueue("smoke", nil)
	t.Log(url)
	_, err := e.c.SendMessage(e.ctx, &awssqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("hello"),
		MessageAttributes: map[string]types.MessageAttributeValue{"a": {DataType: aws.String("String"), StringValue: aws.String("x")}}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.c.ReceiveMessage(e.ctx, &awssqs.ReceiveMessageInput{QueueUrl: &url, MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", out.Messages)
	_, err = e.c.GetQueueUrl(e.ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String("nope")})
	t.Log(err)
}
