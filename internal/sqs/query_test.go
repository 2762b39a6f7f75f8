package sqs_test

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// The query protocol (Debian's boto3 and AWS CLI, aws-sdk-go-v2/service/sqs
// up to v1.26, the Java SDK v1) tested with raw form-encoded requests and
// assertions on the XML, as the API reference shows it.

type xmlError struct {
	XMLName   xml.Name `xml:"ErrorResponse"`
	Type      string   `xml:"Error>Type"`
	Code      string   `xml:"Error>Code"`
	Message   string   `xml:"Error>Message"`
	RequestID string   `xml:"RequestId"`
}

type xmlPair struct {
	Name  string `xml:"Name"`
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

type xmlMessage struct {
	MessageID              string    `xml:"MessageId"`
	ReceiptHandle          string    `xml:"ReceiptHandle"`
	MD5OfBody              string    `xml:"MD5OfBody"`
	Body                   string    `xml:"Body"`
	Attributes             []xmlPair `xml:"Attribute"`
	MD5OfMessageAttributes string    `xml:"MD5OfMessageAttributes"`
	MessageAttributes      []struct {
		Name  string `xml:"Name"`
		Value struct {
			StringValue string `xml:"StringValue"`
			BinaryValue string `xml:"BinaryValue"`
			DataType    string `xml:"DataType"`
		} `xml:"Value"`
	} `xml:"MessageAttribute"`
}

// xmlResponse covers every result shape the tests read.
type xmlResponse struct {
	XMLName xml.Name
	Xmlns   string `xml:"xmlns,attr"`
	Result  struct {
		QueueURLs                    []string     `xml:"QueueUrl"`
		MessageID                    string       `xml:"MessageId"`
		MD5OfMessageBody             string       `xml:"MD5OfMessageBody"`
		MD5OfMessageAttributes       string       `xml:"MD5OfMessageAttributes"`
		MD5OfMessageSystemAttributes string       `xml:"MD5OfMessageSystemAttributes"`
		Messages                     []xmlMessage `xml:"Message"`
		Attributes                   []xmlPair    `xml:"Attribute"`
		Tags                         []xmlPair    `xml:"Tag"`
		Successful                   []struct {
			ID        string `xml:"Id"`
			MessageID string `xml:"MessageId"`
		} `xml:"SendMessageBatchResultEntry"`
		Failed []struct {
			ID          string `xml:"Id"`
			Code        string `xml:"Code"`
			SenderFault bool   `xml:"SenderFault"`
		} `xml:"BatchResultErrorEntry"`
	} `xml:",any"`
	RequestID string `xml:"ResponseMetadata>RequestId"`
}

// post sends a query request to path (the endpoint or a queue URL's path).
func (e *env) post(path string, params url.Values) (int, []byte, http.Header) {
	e.t.Helper()
	resp, err := http.Post(e.endpoint+path, "application/x-www-form-urlencoded; charset=utf-8", strings.NewReader(params.Encode()))
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, body, resp.Header
}

// queryOK posts and decodes a successful <Action>Response.
func (e *env) queryOK(path string, params url.Values) xmlResponse {
	e.t.Helper()
	status, body, _ := e.post(path, params)
	if status != 200 {
		e.t.Fatalf("%s: HTTP %d: %s", params.Get("Action"), status, body)
	}
	var r xmlResponse
	if err := xml.Unmarshal(body, &r); err != nil {
		e.t.Fatalf("%s: %v in %s", params.Get("Action"), err, body)
	}
	if r.XMLName.Local != params.Get("Action")+"Response" || r.Xmlns != "http://queue.amazonaws.com/doc/2012-11-05/" || r.RequestID == "" {
		e.t.Fatalf("%s: envelope %v xmlns=%q request id %q", params.Get("Action"), r.XMLName, r.Xmlns, r.RequestID)
	}
	return r
}

// queryErr posts and decodes an <ErrorResponse>, checking status and code.
func (e *env) queryErr(params url.Values, status int, code string) xmlError {
	e.t.Helper()
	got, body, _ := e.post("/", params)
	var r xmlError
	if err := xml.Unmarshal(body, &r); err != nil {
		e.t.Fatalf("%v in %s", err, body)
	}
	if got != status || r.Code != code || r.Type != "Sender" || r.RequestID == "" {
		e.t.Fatalf("%s: HTTP %d %+v, want %d %s", params.Get("Action"), got, r, status, code)
	}
	return r
}

func vals(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

func TestQueryProtocolMessages(t *testing.T) {
	e := newEnv(t)
	r := e.queryOK("/", vals("Action", "CreateQueue", "QueueName", "q1", "Attribute.1.Name", "VisibilityTimeout", "Attribute.1.Value", "40",
		"Tag.1.Key", "team", "Tag.1.Value", "core", "Version", "2012-11-05"))
	qurl := r.Result.QueueURLs[0]
	if qurl != e.endpoint+"/000000000000/q1" {
		t.Fatalf("QueueUrl %q", qurl)
	}
	bin := base64.StdEncoding.EncodeToString([]byte{0, 1, 0xff})
	r = e.queryOK("/", vals("Action", "SendMessage", "QueueUrl", qurl, "MessageBody", "charge order 101 ✓",
		"MessageAttribute.1.Name", "color", "MessageAttribute.1.Value.DataType", "String", "MessageAttribute.1.Value.StringValue", "blue",
		"MessageAttribute.2.Name", "count", "MessageAttribute.2.Value.DataType", "Number", "MessageAttribute.2.Value.StringValue", "42",
		"MessageAttribute.3.Name", "kind", "MessageAttribute.3.Value.DataType", "String.custom", "MessageAttribute.3.Value.StringValue", "x",
		"MessageAttribute.4.Name", "blob", "MessageAttribute.4.Value.DataType", "Binary", "MessageAttribute.4.Value.BinaryValue", bin,
		"MessageSystemAttribute.1.Name", "AWSTraceHeader", "MessageSystemAttribute.1.Value.DataType", "String",
		"MessageSystemAttribute.1.Value.StringValue", traceHeader))
	if r.Result.MD5OfMessageAttributes != md5OfTestAttrs || r.Result.MD5OfMessageSystemAttributes != md5OfTrace || r.Result.MessageID == "" {
		t.Fatalf("send result %+v", r.Result)
	}
	r = e.queryOK("/", vals("Action", "ReceiveMessage", "QueueUrl", qurl, "AttributeName.1", "All", "MessageAttributeName.1", "All", "MaxNumberOfMessages", "5"))
	if len(r.Result.Messages) != 1 {
		t.Fatalf("received %d", len(r.Result.Messages))
	}
	m := r.Result.Messages[0]
	sum := md5.Sum([]byte(m.Body))
	if m.Body != "charge order 101 ✓" || m.MD5OfMessageAttributes != md5OfTestAttrs || m.MD5OfBody != hex.EncodeToString(sum[:]) {
		t.Fatalf("message %+v", m)
	}
	attrs := map[string]string{}
	for _, a := range m.Attributes {
		attrs[a.Name] = a.Value
	}
	if attrs["ApproximateReceiveCount"] != "1" || attrs["AWSTraceHeader"] != traceHeader || attrs["SentTimestamp"] == "" {
		t.Fatalf("system attributes %v", attrs)
	}
	for _, a := range m.MessageAttributes {
		if a.Name == "blob" && (a.Value.BinaryValue != bin || a.Value.DataType != "Binary") {
			t.Fatalf("binary attribute %+v", a)
		}
	}
	// Posted to the queue URL itself, without a QueueUrl parameter.
	e.queryOK("/000000000000/q1", vals("Action", "DeleteMessage", "ReceiptHandle", m.ReceiptHandle))
	r = e.queryOK("/", vals("Action", "GetQueueAttributes", "QueueUrl", qurl, "AttributeName.1", "VisibilityTimeout", "AttributeName.2", "ApproximateNumberOfMessages"))
	got := map[string]string{}
	for _, a := range r.Result.Attributes {
		got[a.Name] = a.Value
	}
	if got["VisibilityTimeout"] != "40" || got["ApproximateNumberOfMessages"] != "0" || len(got) != 2 {
		t.Fatalf("attributes %v", got)
	}
	r = e.queryOK("/", vals("Action", "ListQueueTags", "QueueUrl", qurl))
	if len(r.Result.Tags) != 1 || r.Result.Tags[0].Key != "team" || r.Result.Tags[0].Value != "core" {
		t.Fatalf("tags %+v", r.Result.Tags)
	}
	e.queryOK("/", vals("Action", "CreateQueue", "QueueName", "q2"))
	r = e.queryOK("/", vals("Action", "ListQueues", "QueueNamePrefix", "q"))
	if len(r.Result.QueueURLs) != 2 {
		t.Fatalf("ListQueues %v", r.Result.QueueURLs)
	}
}

func TestQueryProtocolBatchAndErrors(t *testing.T) {
	e := newEnv(t)
	qurl := e.queryOK("/", vals("Action", "CreateQueue", "QueueName", "b")).Result.QueueURLs[0]
	r := e.queryOK("/", vals("Action", "SendMessageBatch", "QueueUrl", qurl,
		"SendMessageBatchRequestEntry.1.Id", "good", "SendMessageBatchRequestEntry.1.MessageBody", "hello",
		"SendMessageBatchRequestEntry.2.Id", "late", "SendMessageBatchRequestEntry.2.MessageBody", "x", "SendMessageBatchRequestEntry.2.DelaySeconds", "1000"))
	if len(r.Result.Successful) != 1 || r.Result.Successful[0].ID != "good" || len(r.Result.Failed) != 1 ||
		r.Result.Failed[0].Code != "InvalidParameterValue" || !r.Result.Failed[0].SenderFault {
		t.Fatalf("batch %+v", r.Result)
	}
	e.queryErr(vals("Action", "SendMessageBatch", "QueueUrl", qurl,
		"SendMessageBatchRequestEntry.1.Id", "a", "SendMessageBatchRequestEntry.1.MessageBody", "x",
		"SendMessageBatchRequestEntry.2.Id", "a", "SendMessageBatchRequestEntry.2.MessageBody", "y"), 400, "AWS.SimpleQueueService.BatchEntryIdsNotDistinct")
	e.queryErr(vals("Action", "DeleteMessageBatch", "QueueUrl", qurl), 400, "AWS.SimpleQueueService.EmptyBatchRequest")
	e.queryErr(vals("Action", "GetQueueUrl", "QueueName", "nope"), 400, "AWS.SimpleQueueService.NonExistentQueue")
	e.queryErr(vals("Action", "SendMessage", "QueueUrl", qurl), 400, "MissingParameter")
	e.queryErr(vals("Action", "DeleteMessage", "QueueUrl", qurl, "ReceiptHandle", "bogus"), 404, "ReceiptHandleIsInvalid")
	e.queryErr(vals("Action", "ReceiveMessage", "QueueUrl", qurl, "MaxNumberOfMessages", "ten"), 400, "InvalidParameterValue")
	e.queryErr(vals("Action", "CreateQueue", "QueueName", "b", "Attribute.1.Name", "DelaySeconds", "Attribute.1.Value", "901"), 400, "InvalidAttributeValue")
	e.queryErr(vals("Action", "Frobnicate"), 400, "InvalidAction")
	e.queryErr(vals("QueueName", "x"), 400, "MissingAction")
	status, body, _ := e.post("/", url.Values{"Action": {"SendMessage"}, "QueueUrl": {qurl}, "MessageBody": {strings.Repeat("x", 9<<20)}})
	if status != 413 || !strings.Contains(string(body), "RequestEntityTooLarge") {
		t.Fatalf("oversized body: HTTP %d %.200s", status, body)
	}
}

func TestJSONProtocolErrors(t *testing.T) {
	e := newEnv(t)
	do := func(target, body string) (int, string, http.Header) {
		req, _ := http.NewRequest("POST", e.endpoint+"/", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		req.Header.Set("X-Amz-Target", target)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	status, body, h := do("AmazonSQS.GetQueueUrl", `{"QueueName":"missing"}`)
	if status != 400 || h.Get("x-amzn-query-error") != "AWS.SimpleQueueService.NonExistentQueue;Sender" ||
		!strings.Contains(body, `"__type":"com.amazonaws.sqs#QueueDoesNotExist"`) || h.Get("x-amzn-RequestId") == "" {
		t.Fatalf("HTTP %d %s %v", status, body, h)
	}
	for _, tc := range []struct{ target, body, code string }{
		{"AmazonSQS.CreateQueue", `{"QueueName":`, "SerializationException"},
		{"AmazonSQS.CreateQueue", `{"QueueName":7}`, "SerializationException"},
		{"AmazonSQS.Nope", `{}`, "InvalidAction"},
		{"Other.CreateQueue", `{}`, "InvalidAction"},
		{"AmazonSQS.CreateQueue", `{}`, "MissingParameter"},
	} {
		status, body, h := do(tc.target, tc.body)
		if status != 400 || !strings.HasPrefix(h.Get("x-amzn-query-error"), tc.code+";") {
			t.Errorf("%s %s: HTTP %d %s %q", tc.target, tc.body, status, body, h.Get("x-amzn-query-error"))
		}
	}
	status, body, _ = do("AmazonSQS.ListQueues", ``)
	if status != 200 || body != "{}" {
		t.Fatalf("empty ListQueues: %d %s", status, body)
	}
}
