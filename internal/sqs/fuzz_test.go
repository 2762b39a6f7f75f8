package sqs

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// The fuzz targets feed arbitrary request bodies through the whole handler
// (decoder, validation, broker on an in-memory FS, encoder). Any answer is
// fine except a 5xx: a panic is recovered into InternalFailure, so a 500 is
// how a crash shows up here. Every answer must also be well-formed in its
// protocol.

func fuzzHandler(f *testing.F) *Handler {
	b, err := broker.Open(broker.Options{Dir: "/fuzz", FS: vfs.NewMem(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { b.Close() })
	for _, s := range []broker.QueueSettings{{Name: "q"}, {Name: "f.fifo", FIFO: true}, {Name: "dlq"}} {
		if _, err := b.CreateQueue(s); err != nil {
			f.Fatal(err)
		}
	}
	return NewHandler(b, Config{AdvertisedURL: "http://sqs.test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxRequestBytes: 64 << 10})
}

func actionNames() []string {
	names := make([]string, 0, len(actions))
	for n := range actions {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// statusClientGone (nginx's 499, "client closed request") marks an answer
// cut short by the test's own deadline; the targets accept it.
const statusClientGone = 499

// serve runs one request with a short deadline, so long polls end quickly.
func serve(h *Handler, req *http.Request) *httptest.ResponseRecorder {
	ctx, cancel := context.WithTimeout(req.Context(), 5*time.Millisecond)
	defer cancel()
	rec := httptest.NewRecorder()
	start := time.Now()
	h.ServeHTTP(rec, req.WithContext(ctx))
	if d := time.Since(start); d > 2*time.Second {
		rec.Code = 599 // fails the target: a request must not outlive its client by much
		rec.Body.WriteString("took " + d.String())
	}
	// The short deadline is the test's own: on a loaded machine a durable
	// send can outlast it, and the 500 that answers "deadline exceeded" is
	// not a crash (a recovered panic reads differently).
	if rec.Code == http.StatusInternalServerError && ctx.Err() != nil &&
		bytes.Contains(rec.Body.Bytes(), []byte(context.DeadlineExceeded.Error())) {
		rec.Code = statusClientGone
	}
	return rec
}

func FuzzJSONRequest(f *testing.F) {
	h := fuzzHandler(f)
	names := actionNames()
	index := func(name string) byte {
		return byte(sort.SearchStrings(names, name))
	}
	f.Add(index("SendMessage"), []byte(`{"QueueUrl":"http://sqs.test/000000000000/q","MessageBody":"hi","MessageAttributes":{"a":{"DataType":"Binary","BinaryValue":"AAE="}}}`))
	f.Add(index("ReceiveMessage"), []byte(`{"QueueUrl":"q","MaxNumberOfMessages":10,"MessageAttributeNames":["All"],"AttributeNames":["All"]}`))
	f.Add(index("SendMessageBatch"), []byte(`{"QueueUrl":"f.fifo","Entries":[{"Id":"1","MessageBody":"x","MessageGroupId":"g","MessageDeduplicationId":"d"}]}`))
	f.Add(index("CreateQueue"), []byte(`{"QueueName":"n","Attributes":{"RedrivePolicy":"{\"deadLetterTargetArn\":\"arn:aws:sqs:us-east-1:000000000000:dlq\",\"maxReceiveCount\":2}"}}`))
	f.Add(index("DeleteMessageBatch"), []byte(`{"QueueUrl":"q","Entries":[{"Id":"a","ReceiptHandle":"AQAAAAAAAAAAAAAAAAAAAAEAAAAA"}]}`))
	f.Add(index("SetQueueAttributes"), []byte(`{"QueueUrl":"q","Attributes":{"VisibilityTimeout":"0"}}`))
	f.Fuzz(func(t *testing.T, action byte, body []byte) {
		req := httptest.NewRequest("POST", "/", bytes.NewReader(body))
		req.Header.Set("Content-Type", jsonContentType)
		req.Header.Set("X-Amz-Target", "AmazonSQS."+names[int(action)%len(names)])
		rec := serve(h, req)
		if rec.Code >= 500 {
			t.Fatalf("HTTP %d: %s", rec.Code, rec.Body)
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("answer is not JSON: %q", rec.Body)
		}
	})
}

func FuzzQueryRequest(f *testing.F) {
	h := fuzzHandler(f)
	f.Add("/", []byte("Action=SendMessage&QueueUrl=q&MessageBody=hi&MessageAttribute.1.Name=a&MessageAttribute.1.Value.DataType=Number&MessageAttribute.1.Value.StringValue=1e5"))
	f.Add("/000000000000/q", []byte("Action=ReceiveMessage&AttributeName.1=All&MessageAttributeName.1=All&MaxNumberOfMessages=3"))
	f.Add("/", []byte("Action=SendMessageBatch&QueueUrl=q&SendMessageBatchRequestEntry.1.Id=a&SendMessageBatchRequestEntry.1.MessageBody=x&SendMessageBatchRequestEntry.2.Id=a"))
	f.Add("/", []byte("Action=CreateQueue&QueueName=x.fifo&Attribute.1.Name=FifoQueue&Attribute.1.Value=true&Tag.1.Key=k&Tag.1.Value=v"))
	f.Add("/", []byte("Action=ChangeMessageVisibilityBatch&QueueUrl=q&ChangeMessageVisibilityBatchRequestEntry.1.Id=a&ChangeMessageVisibilityBatchRequestEntry.1.ReceiptHandle=x&ChangeMessageVisibilityBatchRequestEntry.1.VisibilityTimeout=5"))
	f.Add("/", []byte("Action=ListQueues&MaxResults=1&NextToken=%ZZ"))
	f.Fuzz(func(t *testing.T, path string, body []byte) {
		req, err := http.NewRequest("POST", "http://sqs.test/", bytes.NewReader(body))
		if err != nil {
			return
		}
		req.URL.Path = path
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := serve(h, req)
		if rec.Code >= 500 {
			t.Fatalf("HTTP %d: %s", rec.Code, rec.Body)
		}
		d := xml.NewDecoder(rec.Body)
		for {
			_, err := d.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("answer is not XML: %v", err)
			}
		}
	})
}
