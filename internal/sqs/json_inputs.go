package sqs

import "unicode/utf8"

// The inputs of the hot actions decoded by json_decode.go. Each lists its
// members by their JSON names, in the order of its struct's fields (with
// embedded structs' fields where encoding/json promotes them), and decodes
// into a copy that replaces the receiver only when the whole body decoded.

var sendEntryNames = []string{"Id", "MessageBody", "DelaySeconds", "MessageAttributes",
	"MessageSystemAttributes", "MessageDeduplicationId", "MessageGroupId"}

// member decodes one member of a send entry, skipping unknown ones.
func (e *sendEntry) member(d *jdec, depth int, key []byte) bool {
	switch fieldOf(key, sendEntryNames) {
	case 0:
		return d.setString(&e.ID)
	case 1:
		return d.setText(&e.MessageBody)
	case 2:
		return d.setInt(&e.DelaySeconds)
	case 3:
		return d.attrs(depth, &e.MessageAttributes)
	case 4:
		return d.attrs(depth, &e.MessageSystemAttributes)
	case 5:
		return d.setString(&e.MessageDeduplicationID)
	case 6:
		return d.setString(&e.MessageGroupID)
	}
	return d.skip(depth)
}

var msgAttrNames = []string{"DataType", "StringValue", "BinaryValue", "StringListValues", "BinaryListValues"}

// attrs decodes a map of message attributes: a map member adds to the map
// (made if nil), each value decoded into a fresh msgAttr (null: the zero
// one), as encoding/json decodes a map.
func (d *jdec) attrs(depth int, m *msgAttrs) bool {
	if d.null() {
		*m = nil
		return true
	}
	if d.peek() != '{' {
		return false
	}
	if *m == nil {
		*m = msgAttrs{} // an empty object is an empty map, not nil
	}
	return d.object(depth+1, func(name []byte) bool {
		if !utf8.Valid(name) {
			return false // encoding/json would replace the invalid bytes
		}
		var a msgAttr
		if !d.null() && !d.object(depth+2, func(key []byte) bool { return a.member(d, depth+2, key) }) {
			return false
		}
		(*m)[string(name)] = a
		return true
	})
}

func (a *msgAttr) member(d *jdec, depth int, key []byte) bool {
	switch fieldOf(key, msgAttrNames) {
	case 0:
		return d.setString(&a.DataType)
	case 1:
		return d.setText(&a.StringValue)
	case 2:
		return d.setBytes(&a.BinaryValue)
	case 3:
		return d.strings(depth, &a.StringListValues)
	case 4:
		return sliceInto(d, depth+1, &a.BinaryListValues, d.setBytes)
	}
	return d.skip(depth)
}

// Each input's decodeFast repeats the same frame (decode into a fresh value,
// store it only if all of it decoded) on purpose: a generic helper taking
// the member function as a func value makes the value and the decoder
// escape to the heap (go build -gcflags=-m: "moved to heap: v"), two more
// allocations per request on the hottest path (BenchmarkDecodeJSON/*/fast:
// SendMessage 4 → 6 allocs, 1,184 → 1,312 B).
var sendMessageNames = []string{"QueueUrl"}

func (in *sendMessageInput) decodeFast(body []byte) bool {
	v := sendMessageInput{}
	d := &jdec{b: body}
	ok := d.top(func(key []byte) bool {
		if fieldOf(key, sendMessageNames) == 0 {
			return d.setString(&v.QueueURL)
		}
		return v.sendEntry.member(d, 1, key)
	})
	if ok {
		*in = v
	}
	return ok
}

var batchNames = []string{"QueueUrl", "Entries"}

func (in *sendMessageBatchInput) decodeFast(body []byte) bool {
	v := sendMessageBatchInput{}
	d := &jdec{b: body}
	ok := d.top(func(key []byte) bool {
		switch fieldOf(key, batchNames) {
		case 0:
			return d.setString(&v.QueueURL)
		case 1:
			return sliceInto(d, 2, &v.Entries, func(e *sendEntry) bool {
				return d.null() || d.object(2, func(k []byte) bool { return e.member(d, 2, k) })
			})
		}
		return d.skip(1)
	})
	if ok {
		*in = v
	}
	return ok
}

var receiveNames = []string{"QueueUrl", "AttributeNames", "MessageSystemAttributeNames", "MessageAttributeNames",
	"MaxNumberOfMessages", "VisibilityTimeout", "WaitTimeSeconds", "ReceiveRequestAttemptId"}

func (in *receiveMessageInput) decodeFast(body []byte) bool {
	v := receiveMessageInput{}
	d := &jdec{b: body}
	ok := d.top(func(key []byte) bool {
		switch fieldOf(key, receiveNames) {
		case 0:
			return d.setString(&v.QueueURL)
		case 1:
			return d.strings(1, &v.AttributeNames)
		case 2:
			return d.strings(1, &v.MessageSystemAttributeNames)
		case 3:
			return d.strings(1, &v.MessageAttributeNames)
		case 4:
			return d.setInt(&v.MaxNumberOfMessages)
		case 5:
			return d.setInt(&v.VisibilityTimeout)
		case 6:
			return d.setInt(&v.WaitTimeSeconds)
		case 7:
			return d.setString(&v.ReceiveRequestAttemptID)
		}
		return d.skip(1)
	})
	if ok {
		*in = v
	}
	return ok
}

var receiptNames = []string{"QueueUrl", "ReceiptHandle", "VisibilityTimeout"}

func (in *deleteMessageInput) decodeFast(body []byte) bool {
	v := deleteMessageInput{}
	d := &jdec{b: body}
	ok := d.top(func(key []byte) bool {
		switch fieldOf(key, receiptNames[:2]) {
		case 0:
			return d.setString(&v.QueueURL)
		case 1:
			return d.setString(&v.ReceiptHandle)
		}
		return d.skip(1)
	})
	if ok {
		*in = v
	}
	return ok
}

func (in *changeVisibilityInput) decodeFast(body []byte) bool {
	v := changeVisibilityInput{}
	d := &jdec{b: body}
	ok := d.top(func(key []byte) bool {
		switch fieldOf(key, receiptNames) {
		case 0:
			return d.setString(&v.QueueURL)
		case 1:
			return d.setString(&v.ReceiptHandle)
		case 2:
			return d.setInt(&v.VisibilityTimeout)
		}
		return d.skip(1)
	})
	if ok {
		*in = v
	}
	return ok
}

var receiptEntryNames = []string{"Id", "ReceiptHandle", "VisibilityTimeout"}

// decodeFast of the receipt batches (DeleteMessageBatch,
// ChangeMessageVisibilityBatch).
func (in *receiptBatchInput) decodeFast(body []byte) bool {
	v := receiptBatchInput{}
	d := &jdec{b: body}
	ok := d.top(func(key []byte) bool {
		switch fieldOf(key, batchNames) {
		case 0:
			return d.setString(&v.QueueURL)
		case 1:
			return sliceInto(d, 2, &v.Entries, func(e *receiptEntry) bool {
				return d.null() || d.object(2, func(k []byte) bool {
					switch fieldOf(k, receiptEntryNames) {
					case 0:
						return d.setString(&e.ID)
					case 1:
						return d.setString(&e.ReceiptHandle)
					case 2:
						return d.setInt(&e.VisibilityTimeout)
					}
					return d.skip(2)
				})
			})
		}
		return d.skip(1)
	})
	if ok {
		*in = v
	}
	return ok
}
