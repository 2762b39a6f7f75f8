package sqs

import (
	"encoding/base64"
	"slices"
	"strconv"
	"unicode/utf8"
)

// The answers of the hot actions, written without reflection: byte for
// byte what json.Marshal writes for the same values (member order, omitted
// empty members, sorted map keys, its string escapes, HTML characters
// included), which FuzzFastJSONEncode checks. json.Marshal of a
// ReceiveMessage answer was 3-4 % of the server's CPU under W2 over SQS,
// half of it reflection over the same few types.

// jsonAppender is an output that encodes itself.
type jsonAppender interface {
	appendJSON(b []byte) []byte
}

const hexDigits = "0123456789abcdef"

// appendString is encoding/json's appendString with HTML escaping, the
// form json.Marshal writes.
func appendString[S []byte | string](dst []byte, src S) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(src); {
		if b := src[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, src[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		n := min(len(src)-i, utf8.UTFMax)
		c, size := utf8.DecodeRuneInString(string(src[i : i+n]))
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, src[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' { // valid JSON, but not JavaScript: encoding/json escapes them
			dst = append(dst, src[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, src[start:]...)
	return append(dst, '"')
}

// member appends "name": (with a comma unless it is the object's first).
func member(b []byte, name string) []byte {
	if b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, name...)
	return append(b, '"', ':')
}

// keyMember appends a map key as a member name, escaped as a string.
func keyMember(b []byte, key string) []byte {
	if b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	return append(appendString(b, key), ':')
}

func strMember(b []byte, name, v string, omitEmpty bool) []byte {
	if omitEmpty && v == "" {
		return b
	}
	return appendString(member(b, name), v)
}

func appendBase64(b []byte, v []byte) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, v)
	return append(b, '"')
}

// list appends a slice as a JSON array, null when nil.
func list[T any](b []byte, vs []T, elem func([]byte, T) []byte) []byte {
	if vs == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = elem(b, v)
	}
	return append(b, ']')
}

func (r sendResult) appendJSON(b []byte) []byte {
	b = append(b, '{')
	b = strMember(b, "Id", r.ID, true)
	b = strMember(b, "MessageId", r.MessageID, false)
	b = strMember(b, "MD5OfMessageBody", r.MD5OfMessageBody, false)
	b = strMember(b, "MD5OfMessageAttributes", r.MD5OfMessageAttributes, true)
	b = strMember(b, "MD5OfMessageSystemAttributes", r.MD5OfMessageSystemAttributes, true)
	b = strMember(b, "SequenceNumber", r.SequenceNumber, true)
	return append(b, '}')
}

func (e batchError) appendJSON(b []byte) []byte {
	b = append(b, '{')
	b = strMember(b, "Id", e.ID, false)
	b = append(member(b, "SenderFault"), strconv.FormatBool(e.SenderFault)...)
	b = strMember(b, "Code", e.Code, false)
	b = strMember(b, "Message", e.Message, true)
	return append(b, '}')
}

// batchOutput appends {"Successful":[…],"Failed":[…]}.
func batchOutput[S any](b []byte, ok []S, okJSON func([]byte, S) []byte, failed []batchError) []byte {
	b = list(member(append(b, '{'), "Successful"), ok, okJSON)
	b = list(member(b, "Failed"), failed, func(b []byte, e batchError) []byte { return e.appendJSON(b) })
	return append(b, '}')
}

func (o sendMessageBatchOutput) appendJSON(b []byte) []byte {
	return batchOutput(b, o.Successful, func(b []byte, s sendBatchSuccess) []byte { return s.appendJSON(b) }, o.Failed)
}

func (id batchID) appendJSON(b []byte) []byte {
	return append(strMember(append(b, '{'), "Id", id.ID, false), '}')
}

func (o deleteMessageBatchOutput) appendJSON(b []byte) []byte {
	return batchOutput(b, o.Successful, func(b []byte, s deleteBatchSuccess) []byte { return s.appendJSON(b) }, o.Failed)
}

func (o changeVisibilityBatchOutput) appendJSON(b []byte) []byte {
	return batchOutput(b, o.Successful, func(b []byte, s changeVisibilityBatchSuccess) []byte { return s.appendJSON(b) }, o.Failed)
}

func (o receiveMessageOutput) appendJSON(b []byte) []byte {
	// Room for the whole answer at once: ten 1 KiB bodies grown from a
	// few hundred bytes were six copies of it (7 % of the bytes the
	// handler allocated in BenchmarkHandlerRoundTrip).
	n := 16
	for _, m := range o.Messages {
		n += len(m.Body) + len(m.ReceiptHandle) + len(m.MessageID) + 128
		for k, v := range m.Attributes {
			n += len(k) + len(v) + 6
		}
		n += 64 * len(m.MessageAttributes)
	}
	b = slices.Grow(b, n)
	b = append(b, '{')
	if len(o.Messages) > 0 {
		b = list(member(b, "Messages"), o.Messages, func(b []byte, m message) []byte { return m.appendJSON(b) })
	}
	return append(b, '}')
}

func (m message) appendJSON(b []byte) []byte {
	b = append(b, '{')
	b = strMember(b, "MessageId", m.MessageID, false)
	b = strMember(b, "ReceiptHandle", m.ReceiptHandle, false)
	b = strMember(b, "MD5OfBody", m.MD5OfBody, false)
	b = strMember(b, "Body", m.Body, false)
	if len(m.Attributes) > 0 {
		b = append(member(b, "Attributes"), '{')
		for _, k := range sortedKeys(m.Attributes) {
			b = appendString(keyMember(b, k), m.Attributes[k])
		}
		b = append(b, '}')
	}
	b = strMember(b, "MD5OfMessageAttributes", m.MD5OfMessageAttributes, true)
	if len(m.MessageAttributes) > 0 {
		b = append(member(b, "MessageAttributes"), '{')
		for _, k := range sortedKeys(m.MessageAttributes) {
			b = m.MessageAttributes[k].appendJSON(keyMember(b, k))
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

func (a msgAttr) appendJSON(b []byte) []byte {
	b = strMember(append(b, '{'), "DataType", a.DataType, false)
	if a.StringValue != nil {
		b = appendString(member(b, "StringValue"), string(*a.StringValue))
	}
	if len(a.BinaryValue) > 0 {
		b = appendBase64(member(b, "BinaryValue"), a.BinaryValue)
	}
	if len(a.StringListValues) > 0 {
		b = list(member(b, "StringListValues"), a.StringListValues, appendString[string])
	}
	if len(a.BinaryListValues) > 0 {
		b = list(member(b, "BinaryListValues"), a.BinaryListValues, appendBase64)
	}
	return append(b, '}')
}
