package sqs

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// The AWS JSON 1.0 protocol: the action is named by X-Amz-Target, the
// input is a JSON object with the model's member names, the output likewise.

const jsonContentType = "application/x-amz-json-1.0"

var jsonContentTypes = []string{jsonContentType}

// decodeJSON decodes a request body into in. An empty body is an empty
// input (SDKs send "{}", but curl users send nothing).
func decodeJSON(body []byte, in any) error {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil
	}
	// One well-formed value, the request of every client, decodes in place;
	// anything else takes the Decoder, whose answer (its error, or the
	// trailing '}' it lets pass) is what this front-end has always given.
	// Unmarshal checks the whole body before it sets anything, so a
	// malformed one leaves in as it was.
	if json.Unmarshal(body, in) == nil {
		return nil
	}
	return decodeJSONStream(body, in)
}

// decodeJSONStream is decodeJSON through a Decoder: the first value, then
// nothing but white space or a closing bracket.
func decodeJSONStream(body []byte, in any) error {
	d := json.NewDecoder(bytes.NewReader(body))
	if err := d.Decode(in); err != nil {
		return newError(errSerialization, "could not decode the request body: %v", err)
	}
	if d.More() {
		return newError(errSerialization, "could not decode the request body: trailing data")
	}
	return nil
}

func writeJSON(w http.ResponseWriter, c *call, status int, v any) {
	var buf []byte
	var err error
	if a, ok := v.(jsonAppender); ok {
		pb := answerBufs.Get().(*[]byte)
		buf = a.appendJSON((*pb)[:0])
		defer putAnswerBuf(pb, buf)
	} else {
		buf, err = json.Marshal(v)
	}
	if err != nil {
		// Outputs are plain structs of strings and numbers; this is a bug.
		status = http.StatusInternalServerError
		buf = []byte(`{"__type":"com.amazonaws.sqs#InternalFailure","message":"encoding the response failed"}`)
	}
	hd := w.Header()
	// Assigned in canonical form rather than through Set, which
	// canonicalises the name and allocates the value's slice every time;
	// the shared slice is never appended to in place (its capacity is
	// its length, so an Add would copy it).
	hd["Content-Type"] = jsonContentTypes
	hd["X-Amzn-Requestid"] = []string{c.requestID}
	writeBody(w, status, buf)
}

// answerBufs holds the buffers answers are encoded into. An answer is
// copied into the connection's writer before writeBody returns, so its
// buffer is free again at once; a new one every request was a tenth of the
// bytes the handler allocated under W2 over SQS (a ReceiveMessage of ten
// 1 KiB messages is 12 KiB), all of it for the GC to sweep.
var answerBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// maxPooledAnswer bounds what goes back to the pool: a rare large answer
// (ten 256 KiB messages) is left to the GC rather than held.
const maxPooledAnswer = 64 << 10

// putAnswerBuf gives pb back with the storage buf grew into.
func putAnswerBuf(pb *[]byte, buf []byte) {
	if cap(buf) > maxPooledAnswer {
		return
	}
	*pb = buf[:0]
	answerBufs.Put(pb)
}

// writeBody sends an answer with its Content-Length, as SQS does. Without
// it net/http sends any answer over its 2 KiB buffer in chunks (a
// ReceiveMessage of ten 1 KiB messages is 12 KiB): more writes for the
// server and chunk parsing for the client on the hottest answer there is.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	w.Header()["Content-Length"] = contentLength(len(body))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// contentLengths are the Content-Length values of answers up to 4 KiB
// (every answer but a ReceiveMessage's with bodies), made once: a string
// and a slice a request otherwise. Shared as jsonContentTypes is.
var contentLengths = func() [][]string {
	v := make([][]string, 4096)
	for n := range v {
		s := strconv.Itoa(n)
		v[n] = []string{s}
	}
	return v
}()

func contentLength(n int) []string {
	if n < len(contentLengths) {
		return contentLengths[n]
	}
	return []string{strconv.Itoa(n)}
}

func writeJSONError(w http.ResponseWriter, c *call, e *apiError) {
	w.Header().Set("x-amzn-query-error", e.kind.code+";"+e.kind.faultType())
	typ := e.kind.shape
	if !strings.Contains(typ, "#") {
		typ = "com.amazonaws.sqs#" + typ
	}
	writeJSON(w, c, e.kind.status, struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}{typ, e.message})
}

func (h *Handler) writeResult(w http.ResponseWriter, c *call, out any) {
	if !c.json {
		writeXML(w, c, out)
		return
	}
	if out == nil {
		out = emptyObject{}
	}
	writeJSON(w, c, http.StatusOK, out)
}

// emptyObject is the answer of actions that return nothing: {}.
type emptyObject struct{}

func (emptyObject) appendJSON(b []byte) []byte { return append(b, '{', '}') }
