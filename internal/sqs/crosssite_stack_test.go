package sqs_test

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluice-mq/sluice/sluicetest"
)

// The tester's requests, against the SQS listener as `sluice serve` assembles it (on
// loopback, authentication off): a form POST labelled cross-site, and the same POST
// from a page whose name was rebound to 127.0.0.1. Neither sends, purges nor deletes;
// the SDK, which sends neither header, still does all three.
func TestBrowserForgeryRefusedOnSQSListener(t *testing.T) {
	srv := sluicetest.Start(t, sluicetest.WithSQS())
	e := newClientEnv(t, srv.SQSURL)
	queueURL := e.createQueue("victim2", nil)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.SQSURL, "http://"))
	cases := []struct {
		name, host, origin, site string
		status                   int
		code                     string
	}{
		{"cross-site form", "127.0.0.1:" + port, "https://evil.example", "cross-site", http.StatusForbidden, "<Code>AccessDenied</Code>"},
		{"rebound page", "evil.example:" + port, "http://evil.example:" + port, "same-origin", http.StatusMisdirectedRequest, "misdirected request"},
	}
	for _, c := range cases {
		for _, form := range []url.Values{
			{"Action": {"SendMessage"}, "QueueUrl": {queueURL}, "MessageBody": {"forged"}},
			{"Action": {"PurgeQueue"}, "QueueUrl": {queueURL}},
			{"Action": {"DeleteQueue"}, "QueueUrl": {queueURL}},
		} {
			req, _ := http.NewRequest(http.MethodPost, srv.SQSURL+"/", strings.NewReader(form.Encode()))
			req.Host = c.host
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", c.origin)
			req.Header.Set("Sec-Fetch-Site", c.site)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status || !strings.Contains(string(body), c.code) {
				t.Errorf("%s %s: %d %s, want %d with %q", c.name, form.Get("Action"), resp.StatusCode, body, c.status, c.code)
			}
		}
	}
	e.wantDepth(queueURL, 0, 0) // nothing was sent, and the queue is still there
	if _, err := e.c.SendMessage(e.ctx, &awssqs.SendMessageInput{QueueUrl: &queueURL, MessageBody: aws.String("sdk")}); err != nil {
		t.Fatalf("the SDK's SendMessage: %v", err)
	}
	if _, err := e.c.DeleteQueue(e.ctx, &awssqs.DeleteQueueInput{QueueUrl: &queueURL}); err != nil {
		t.Fatalf("the SDK's DeleteQueue: %v", err)
	}
}
