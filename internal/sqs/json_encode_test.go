package sqs

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzFastJSONEncode: every answer json_encode.go writes is byte for byte
// json.Marshal's, for any strings (escapes, HTML characters, invalid
// UTF-8, U+2028) and bytes, with members present, empty and absent.
func FuzzFastJSONEncode(f *testing.F) {
	f.Add("id", "m-1", "<&>\u2028\"\\\x01\xff", []byte{0, 1, 0xff}, true)
	f.Add("", "", "", []byte(nil), false)
	f.Add("\t\n\r\b\f/", "é世🚀", "x", []byte{}, true)
	f.Fuzz(func(t *testing.T, a, b, c string, bin []byte, flag bool) {
		tc := text(c)
		attrs := msgAttrs{a: {DataType: b, StringValue: &tc}, c: {DataType: a, BinaryValue: bin}}
		if flag {
			attrs[b] = msgAttr{StringListValues: []string{a, c}, BinaryListValues: [][]byte{bin, nil}}
		}
		msg := message{MessageID: a, ReceiptHandle: b, MD5OfBody: c, Body: c + a,
			Attributes: attrMap{a: b, b: c}, MD5OfMessageAttributes: b, MessageAttributes: attrs}
		res := sendResult{ID: a, MessageID: b, MD5OfMessageBody: c, MD5OfMessageAttributes: a, MD5OfMessageSystemAttributes: b, SequenceNumber: c}
		fail := batchError{ID: a, SenderFault: flag, Code: b, Message: c}
		var failed []batchError
		if flag {
			failed = []batchError{fail, {}}
		}
		for _, v := range []jsonAppender{
			res, sendResult{}, emptyObject{}, fail,
			sendMessageBatchOutput{Successful: []sendBatchSuccess{{sendResult: res}}, Failed: failed},
			sendMessageBatchOutput{Successful: []sendBatchSuccess{}, Failed: []batchError{}},
			deleteMessageBatchOutput{Successful: []deleteBatchSuccess{{batchID: batchID{a}}, {batchID: batchID{b}}}, Failed: failed},
			changeVisibilityBatchOutput{Successful: []changeVisibilityBatchSuccess{{batchID: batchID{c}}}, Failed: []batchError{fail}},
			receiveMessageOutput{}, receiveMessageOutput{Messages: []message{msg, {}}},
		} {
			want, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if got := v.appendJSON(nil); !bytes.Equal(got, want) {
				t.Fatalf("%T:\n got %s\nwant %s", v, got, want)
			}
		}
	})
}
