package sqs_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Every answer carries its Content-Length, as SQS's do, rather than being
// sent in chunks: a receive of ten 1 KiB messages is far past net/http's
// chunking threshold. JSON and query answers, successes and errors.
func TestAnswersHaveContentLength(t *testing.T) {
	e := newEnv(t)
	q := e.createQueue("sized", nil)
	for range 10 {
		if _, err := e.c.SendMessage(e.ctx, &awssqs.SendMessageInput{QueueUrl: &q, MessageBody: aws.String(strings.Repeat("x", 1024))}); err != nil {
			t.Fatal(err)
		}
	}
	post := func(name, body string, hdr map[string]string, wantStatus, atLeast int) {
		t.Helper()
		req, _ := http.NewRequestWithContext(e.ctx, "POST", e.endpoint, strings.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != wantStatus || len(resp.TransferEncoding) > 0 || resp.ContentLength != int64(len(got)) || len(got) < atLeast {
			t.Errorf("%s: HTTP %d, Transfer-Encoding %v, Content-Length %d, %d bytes read", name, resp.StatusCode, resp.TransferEncoding, resp.ContentLength, len(got))
		}
	}
	jsonHdr := func(action string) map[string]string {
		return map[string]string{"X-Amz-Target": "AmazonSQS." + action, "Content-Type": "application/x-amz-json-1.0"}
	}
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	post("JSON ReceiveMessage", `{"QueueUrl":"`+q+`","MaxNumberOfMessages":5}`, jsonHdr("ReceiveMessage"), 200, 5*1024)
	post("query ReceiveMessage", url.Values{"Action": {"ReceiveMessage"}, "QueueUrl": {q}, "MaxNumberOfMessages": {"5"}}.Encode(), form, 200, 5*1024)
	post("JSON error", `{"QueueUrl":"nosuchqueue"}`, jsonHdr("ReceiveMessage"), 400, 1)
	post("query error", "Action=ReceiveMessage&QueueUrl=nosuchqueue", form, 400, 1)
}
