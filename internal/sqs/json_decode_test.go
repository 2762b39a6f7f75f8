package sqs

import (
	"bytes"
	"reflect"
	"testing"
)

// fastInputs makes one fresh input of every action json_decode.go decodes.
func fastInputs() []input {
	return []input{&sendMessageInput{}, &sendMessageBatchInput{}, &receiveMessageInput{},
		&deleteMessageInput{}, &changeVisibilityInput{}, &deleteBatchInput{}, &changeVisibilityBatchInput{}}
}

// fastSeeds are bodies the SDKs send and the corners where encoding/json
// has rules of its own: member names matched under Unicode case folding
// (ſ is s, K is k), duplicate members (a slice decodes into what it held,
// a map adds to itself), null for each kind, escapes and invalid UTF-8,
// base64 with line breaks, numbers that are not ints, what may follow the
// first value.
var fastSeeds = []string{
	`{"QueueUrl":"http://127.0.0.1:9324/000000000000/q","MessageBody":"hello"}`,
	`{"MessageAttributes":{"a":{"DataType":"String","StringValue":"v"},"b":{"DataType":"Binary","BinaryValue":"AQI="}},"MessageBody":"x","QueueUrl":"q"}`,
	`{"MessageSystemAttributes":{"AWSTraceHeader":{"DataType":"String","StringValue":"Root=1-5759e988-bd862e3fe1be46a994272793"}},"MessageBody":"x"}`,
	`{"Entries":[{"Id":"0","MessageBody":"a"},{"Id":"1","MessageBody":"b","DelaySeconds":3}],"QueueUrl":"q"}`,
	`{"MaxNumberOfMessages":10,"QueueUrl":"q","WaitTimeSeconds":20,"AttributeNames":["All"],"MessageAttributeNames":["All"]}`,
	`{"QueueUrl":"q","ReceiptHandle":"AQEB+/=="}`, `{"QueueUrl":"q","ReceiptHandle":"r","VisibilityTimeout":0}`,
	`{"Entries":[{"Id":"a","ReceiptHandle":"r1"},{"Id":"b","ReceiptHandle":"r2","VisibilityTimeout":5}],"QueueUrl":"q"}`,
	`{"queueurl":"a","QUEUEURL":"b","ſd":"c","messagebody":"d","Kd":"e"}`, `{"MessageBody":"b"}}`, `{} ]x`, `{}x`, `{} x`,
	`{"DelaySeconds":"1"}`, `{"DelaySeconds":1.0}`, `{"DelaySeconds":1e2}`, `{"DelaySeconds":-0}`, `{"DelaySeconds":99999999999999999999}`,
	`{"DelaySeconds":5,"DelaySeconds":null}`, `{"MessageBody":"\u00e9\ud800\udc00\ud800"}`, `{"QueueUrl":"\ud800x\udc00\ud83d\ude00\/\""}`,
	"{\"QueueUrl\":\"\xff\xfe\",\"MessageBody\":\"\xff\"}", "{\"Id\":\"\x01\"}", `{"Entries":[{"Id":"a","ReceiptHandle":"r"},{"Id":"c"}],"Entries":[{"Id":"b"}],"Entries":[null,null]}`,
	`{"AttributeNames":["a","b","c"],"AttributeNames":["x"],"AttributeNames":[null,null,null]}`, `{"AttributeNames":[]}`, `{"AttributeNames":null}`,
	`{"MessageAttributes":{"a":null,"b":{}},"MessageAttributes":{"c":{"DataType":"Number","StringValue":"1"}}}`, `{"MessageAttributes":{}}`,
	`{"MessageAttributes":{"a":{"BinaryValue":"AQ\nI="}}}`, `{"MessageAttributes":{"a":{"BinaryValue":""}}}`, `{"MessageAttributes":{"a":{"BinaryValue":[1,2]}}}`,
	`{"MessageAttributes":{"a":{"StringListValues":[],"BinaryListValues":["AQ==",null]}}}`, `{"MessageAttributes":{"\u00e9":{}}}`,
	`{"Unknown":{"a":[1,-2.5e+3,true,false,null,{"b":"\u0041"}]},"MessageBody":"m"}`, `{"x":01}`, `{"x":1.}`, `{"x":-}`, `{"x":tru}`,
	`{"Entries":null}`, `{"Entries":[]}`, `{"Entries":{}}`, `null`, `[]`, `"s"`, `{`, `{"a"}`, `{"a":}`, `{,}`, `{"a":1,}`, ` `,
}

// FuzzFastJSON: the hand-written decoder against encoding/json
// (decodeJSON) for every input it serves. Where it decodes a body,
// decodeJSON must accept the body and decode the same value; where it does
// not, it must leave its input untouched, and the handler's decode (fast,
// else decodeJSON) must answer exactly as decodeJSON does, error included.
func FuzzFastJSON(f *testing.F) {
	for _, s := range fastSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		trimmed := bytes.TrimSpace(body)
		for i := range fastInputs() {
			fast, want, got := fastInputs()[i], fastInputs()[i], fastInputs()[i]
			wantErr := decodeJSON(body, want)
			if len(trimmed) > 0 {
				if fast.(fastDecoder).decodeFast(trimmed) {
					if wantErr != nil {
						t.Fatalf("%T %q: fast decoder accepted, encoding/json refused: %v", fast, body, wantErr)
					}
					if !reflect.DeepEqual(fast, want) {
						t.Fatalf("%T %q: fast decoded %+v, encoding/json %+v", fast, body, fast, want)
					}
				} else if !reflect.DeepEqual(fast, fastInputs()[i]) {
					t.Fatalf("%T %q: refused, but changed its input to %+v", fast, body, fast)
				}
			}
			err := (&call{json: true, body: body}).decode(got)
			if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
				t.Fatalf("%T %q: decode err %v, encoding/json %v", got, body, err, wantErr)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%T %q: decoded %+v, encoding/json %+v", got, body, got, want)
			}
		}
	})
}

// TestFastJSONTakesSDKBodies: what aws-sdk-go-v2 sends for the hot actions
// is decoded by the fast decoder, not handed back to encoding/json.
func TestFastJSONTakesSDKBodies(t *testing.T) {
	for _, tc := range []struct {
		in   fastDecoder
		body string
	}{
		{&sendMessageInput{}, fastSeeds[0]}, {&sendMessageInput{}, fastSeeds[1]}, {&sendMessageInput{}, fastSeeds[2]},
		{&sendMessageBatchInput{}, fastSeeds[3]}, {&receiveMessageInput{}, fastSeeds[4]}, {&deleteMessageInput{}, fastSeeds[5]},
		{&changeVisibilityInput{}, fastSeeds[6]}, {&deleteBatchInput{}, fastSeeds[7]}, {&changeVisibilityBatchInput{}, fastSeeds[7]},
	} {
		if !tc.in.decodeFast([]byte(tc.body)) {
			t.Errorf("%T: %s left to encoding/json", tc.in, tc.body)
		}
	}
}

// BenchmarkDecodeJSON: a SendMessage of 1 KiB (what W2 and W3 send), a
// ReceiveMessage and a DeleteMessageBatch of 10, through encoding/json
// (decodeJSON) and the fast decoder.
func BenchmarkDecodeJSON(b *testing.B) {
	receipts := `{"Entries":[`
	for i := range 10 {
		if i > 0 {
			receipts += ","
		}
		receipts += `{"Id":"` + string(rune('0'+i)) + `","ReceiptHandle":"q.AAAAAAAAAAEAAAAAAAAAAQ.c2x1aWNlLXJlY2VpcHQtMDAwMDAwMDAwMQ"}`
	}
	receipts += `],"QueueUrl":"http://127.0.0.1:9324/000000000000/bench-queue"}`
	for _, tc := range []struct {
		name string
		in   func() input
		body string
	}{
		{"SendMessage", func() input { return &sendMessageInput{} },
			`{"MessageBody":"` + string(bytes.Repeat([]byte("x"), 1024)) + `","QueueUrl":"http://127.0.0.1:9324/000000000000/bench-queue"}`},
		{"ReceiveMessage", func() input { return &receiveMessageInput{} }, fastSeeds[4]},
		{"DeleteMessageBatch", func() input { return &deleteBatchInput{} }, receipts},
	} {
		body := []byte(tc.body)
		b.Run(tc.name+"/encoding-json", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := decodeJSON(body, tc.in()); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/fast", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !tc.in().(fastDecoder).decodeFast(body) {
					b.Fatal("left to encoding/json")
				}
			}
		})
	}
}
