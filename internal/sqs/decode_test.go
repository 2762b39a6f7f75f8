package sqs

import (
	"bytes"
	"encoding/base64"
	"net/url"
	"reflect"
	"testing"
	"testing/iotest"

	"github.com/sluice-mq/sluice/internal/broker"
)

func TestFormIndexed(t *testing.T) {
	v, err := url.ParseQuery("A.10=ten&A.2=two&A.1=one&A.0=zero&A.-1=neg&A.x=bad&A.3.Name=n&A.3.Value=v&AB.1=other")
	if err != nil {
		t.Fatal(err)
	}
	f := form(v)
	if got := f.list("A"); !reflect.DeepEqual(got, []string{"one", "two", "ten"}) {
		t.Errorf("list = %q", got)
	}
	if got := f.pairs("A", "Name", "Value"); got["n"] != "v" {
		t.Errorf("pairs = %q", got)
	}
	if got := f.list("Missing"); got != nil {
		t.Errorf("absent list = %q", got)
	}
}

func TestMessageAttributesFromForm(t *testing.T) {
	v := url.Values{
		"MessageAttribute.1.Name": {"s"}, "MessageAttribute.1.Value.DataType": {"String"}, "MessageAttribute.1.Value.StringValue": {"x"},
		"MessageAttribute.2.Name": {"b"}, "MessageAttribute.2.Value.DataType": {"Binary.png"},
		"MessageAttribute.2.Value.BinaryValue": {base64.StdEncoding.EncodeToString([]byte{1, 2})},
	}
	attrs, err := msgAttrsFromForm(form(v), "MessageAttribute")
	if err != nil {
		t.Fatal(err)
	}
	got, err := attrs.toBroker()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]broker.Attribute{"s": {DataType: "String", Value: []byte("x")}, "b": {DataType: "Binary.png", Value: []byte{1, 2}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("attributes %v, want %v", got, want)
	}
	v.Set("MessageAttribute.2.Value.BinaryValue", "!!!")
	if _, err := msgAttrsFromForm(form(v), "MessageAttribute"); err == nil {
		t.Fatal("bad base64 accepted")
	}
}

func TestAttributeNames(t *testing.T) {
	for name, ok := range map[string]bool{
		"a": true, "a.b-c_d": true, "": false, ".a": false, "a.": false, "a..b": false, "AWS.x": false,
		"amazon.y": false, "a b": false, string(make([]byte, 257)): false,
	} {
		if err := checkAttrName(name); (err == nil) != ok {
			t.Errorf("checkAttrName(%q) = %v", name, err)
		}
	}
}

func TestCheckChars(t *testing.T) {
	for s, ok := range map[string]bool{"plain\t\r\n": true, "é世🚀": true, "\x00": false, "\x1f": false, "\uFFFE": false, "\xff": false} {
		if err := checkChars(s); (err == nil) != ok {
			t.Errorf("checkChars(%q) = %v", s, err)
		}
	}
}

func TestPage(t *testing.T) {
	names := []string{"a", "b", "c", "d"}
	two := 2
	got, next, err := page(names, "", &two)
	if err != nil || !reflect.DeepEqual(got, []string{"a", "b"}) || next == "" {
		t.Fatalf("page 1: %v %q %v", got, next, err)
	}
	got, next, err = page(names, next, &two)
	if err != nil || !reflect.DeepEqual(got, []string{"c", "d"}) || next != "" {
		t.Fatalf("page 2: %v %q %v", got, next, err)
	}
	if _, _, err := page(names, "%%%", &two); err == nil {
		t.Fatal("bad token accepted")
	}
	zero := 0
	if _, _, err := page(names, "", &zero); err == nil {
		t.Fatal("MaxResults 0 accepted")
	}
}

func TestQueueNames(t *testing.T) {
	c := &call{}
	for in, want := range map[string]string{
		"http://localhost:9324/000000000000/q1": "q1", "https://sqs.us-east-1.amazonaws.com/123/q2.fifo": "q2.fifo",
		"q3": "q3", "http://h/queue/q4/": "q4",
	} {
		if got, err := c.queueName(in); err != nil || got != want {
			t.Errorf("queueName(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := c.queueName(""); err == nil {
		t.Error("empty QueueUrl accepted without a path")
	}
	c.pathQueue = "fromPath"
	if got, _ := c.queueName(""); got != "fromPath" {
		t.Errorf("path queue = %q", got)
	}
	if n, ok := queueFromARN("arn:aws:sqs:eu-west-1:111:dlq"); !ok || n != "dlq" {
		t.Errorf("queueFromARN = %q %v", n, ok)
	}
	for _, bad := range []string{"", "arn:aws:sns:us-east-1:1:x", "arn:aws:sqs:us-east-1:1:", "dlq"} {
		if _, ok := queueFromARN(bad); ok {
			t.Errorf("queueFromARN(%q) accepted", bad)
		}
	}
}

func TestMD5OfBinaryAttribute(t *testing.T) {
	// Computed outside Go (Python hashlib/struct) for {"blob": Binary 00 01 ff}.
	got := md5OfAttributes(map[string]broker.Attribute{"blob": {DataType: "Binary", Value: []byte{0, 1, 0xff}}})
	if got != "c6f49393fc67081f1c18e916ec5e8004" {
		t.Fatalf("digest %q", got)
	}
	if md5OfAttributes(nil) != "" {
		t.Fatal("empty attributes have a digest")
	}
}

// FuzzDecodeJSON: decodeJSON, which tries json.Unmarshal first, decodes
// every body as the Decoder alone did: the same inputs, the same refusals.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{`{"QueueUrl":"u","MessageBody":"b"}`, `{"MessageBody":"b"}}`, `{}]`, `{} x`,
		`{"DelaySeconds":"1"}`, `{"MessageBody":"\u00e9\ud800"}`, ` `, `{"MessageAttributes":{"a":{"DataType":"String","StringValue":"v"}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var got, want sendMessageInput
		err := decodeJSON(body, &got)
		wantErr := error(nil)
		if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 {
			wantErr = decodeJSONStream(trimmed, &want)
		}
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("%q: err %v, Decoder alone %v", body, err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: decoded %+v, Decoder alone %+v", body, got, want)
		}
	})
}

// TestReadBody: the announced length is a hint for the buffer, never a
// limit nor a promise: a body shorter or longer than it is read whole.
func TestReadBody(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789"), 300)
	for _, length := range []int64{-1, 0, 1, 512, 2999, 3000, 3001, 1 << 20} {
		got, err := readBody(iotest.OneByteReader(bytes.NewReader(body)), length, 1<<20)
		if err != nil || !bytes.Equal(got, body) {
			t.Errorf("length %d: read %d bytes, err %v; want all %d", length, len(got), err, len(body))
		}
	}
	if _, err := readBody(iotest.TimeoutReader(bytes.NewReader(body)), 3000, 1<<20); err == nil {
		t.Error("a failed read was not reported")
	}
}
