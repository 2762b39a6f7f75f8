package api

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Passing the leader's answer back (forward.go). A forward can be cut: the leader dies
// mid-answer. The client must then see an error it retries (unavailable), in its own
// protocol, never a truncated body (connect-go reports that as an internal "protocol
// error"). So a Connect unary answer is read whole before any of it is sent, and an
// enveloped answer (Connect streams, gRPC, gRPC-Web: 5-byte prefix of flags and length
// before each message) is passed on whole envelope by whole envelope; if it ends before
// its end-of-stream, the forwarding node ends it itself with unavailable.

// wire is the protocol family of a request, by its Content-Type.
type wire int

const (
	wireUnary   wire = iota // Connect unary: application/proto, application/json, GET
	wireConnect             // Connect streaming: application/connect+...
	wireGRPC                // application/grpc...: status in HTTP trailers
	wireGRPCWeb             // application/grpc-web...: status in a trailer envelope
)

func wireOf(r *http.Request) wire {
	ct := r.Header.Get("Content-Type")
	switch {
	case strings.HasPrefix(ct, "application/connect+"):
		return wireConnect
	case strings.HasPrefix(ct, "application/grpc-web"):
		return wireGRPCWeb
	case strings.HasPrefix(ct, "application/grpc"):
		return wireGRPC
	}
	return wireUnary
}

// Envelope flags that end a stream.
const (
	flagConnectEnd = 0x02
	flagGRPCWebEnd = 0x80
)

// maxForwardedAnswer bounds a unary answer read whole before it is passed on, and one
// envelope of a stream.
const maxForwardedAnswer = 64 << 20

var errEnvelopeTooLarge = errors.New("an envelope larger than 64 MiB")

// passBack writes the leader's answer resp to w, in the client's protocol p.
func passBack(w http.ResponseWriter, resp *http.Response, p wire, leader int32) {
	if p == wireUnary || resp.StatusCode != http.StatusOK {
		// Whole: a unary answer, or a refusal of a stream before it began (no envelopes).
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxForwardedAnswer+1))
		if err == nil && len(body) > maxForwardedAnswer {
			err = errors.New("an answer larger than 64 MiB")
		}
		if err != nil {
			unaryUnavailable(w, leader, err)
			return
		}
		copyHeader(w.Header(), resp.Header)
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(body)
		return
	}
	copyHeader(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	ended, err := copyEnvelopes(w, resp.Body, p)
	if p != wireConnect && err == nil && resp.Header.Get("Grpc-Status") != "" {
		return // gRPC's trailers-only answer: the status came in the headers
	}
	if p == wireGRPC && err == nil && resp.Trailer.Get("Grpc-Status") != "" {
		for k, vs := range resp.Trailer {
			w.Header()[http.TrailerPrefix+k] = vs
		}
		return
	}
	if ended && err == nil {
		return
	}
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	endUnavailable(w, p, fmt.Sprintf("the forward to node %d, which leads, was cut: %v; retry", leader, err))
}

func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = vs
	}
	for _, k := range hopHeaders {
		dst.Del(k)
	}
	dst.Del("Content-Length") // an ending of our own may follow
}

// copyEnvelopes passes whole envelopes from r to w, flushing after each read's worth,
// and reports whether it saw the end-of-stream envelope (Connect, gRPC-Web). err is nil
// on a clean EOF between envelopes.
func copyEnvelopes(w http.ResponseWriter, r io.Reader, p wire) (ended bool, err error) {
	fl, _ := w.(http.Flusher)
	var pending []byte
	tooBig := false
	buf := make([]byte, 32<<10)
	for {
		n, rerr := r.Read(buf)
		pending = append(pending, buf[:n]...)
		whole := 0 // bytes of pending that are complete envelopes
		for len(pending)-whole >= 5 {
			size := int(binary.BigEndian.Uint32(pending[whole+1 : whole+5]))
			if size > maxForwardedAnswer {
				tooBig = true // a leader never sends one: do not hold gigabytes waiting for it
				break
			}
			if len(pending)-whole-5 < size {
				break
			}
			flags := pending[whole]
			whole += 5 + size
			if (p == wireConnect && flags&flagConnectEnd != 0) || (p == wireGRPCWeb && flags&flagGRPCWebEnd != 0) {
				ended = true
			}
		}
		if whole > 0 {
			if _, werr := w.Write(pending[:whole]); werr != nil {
				return ended, werr
			}
			if fl != nil {
				fl.Flush()
			}
			pending = append(pending[:0], pending[whole:]...)
		}
		switch {
		case tooBig:
			return ended, errEnvelopeTooLarge
		case rerr == io.EOF && len(pending) == 0:
			return ended, nil
		case rerr == io.EOF:
			return ended, io.ErrUnexpectedEOF
		case rerr != nil:
			return ended, rerr
		}
	}
}

// endUnavailable ends an enveloped answer with Connect's unavailable in protocol p.
func endUnavailable(w http.ResponseWriter, p wire, msg string) {
	switch p {
	case wireGRPC:
		w.Header().Set(http.TrailerPrefix+"Grpc-Status", "14")
		w.Header().Set(http.TrailerPrefix+"Grpc-Message", url.PathEscape(msg))
	case wireGRPCWeb:
		writeEnvelope(w, flagGRPCWebEnd, []byte("grpc-status: 14\r\ngrpc-message: "+url.PathEscape(msg)+"\r\n"))
	case wireConnect:
		body, _ := json.Marshal(map[string]any{"error": map[string]string{"code": "unavailable", "message": msg}})
		writeEnvelope(w, flagConnectEnd, body)
	}
}

func writeEnvelope(w io.Writer, flags byte, body []byte) {
	var b bytes.Buffer
	b.WriteByte(flags)
	_ = binary.Write(&b, binary.BigEndian, uint32(len(body)))
	b.Write(body)
	_, _ = w.Write(b.Bytes())
}

// cutBeforeAnswer answers, in the client's protocol p, a forward that failed after the
// call may have reached the leader and before any answer came: unavailable.
func cutBeforeAnswer(w http.ResponseWriter, r *http.Request, p wire, leader int32, err error) {
	if p == wireUnary {
		unaryUnavailable(w, leader, err)
		return
	}
	w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
	w.WriteHeader(http.StatusOK)
	endUnavailable(w, p, fmt.Sprintf("the forward to node %d, which leads, was cut: %v; retry", leader, err))
}

// unaryUnavailable answers a Connect unary call with unavailable (HTTP 503).
func unaryUnavailable(w http.ResponseWriter, leader int32, err error) {
	body, _ := json.Marshal(map[string]string{"code": "unavailable",
		"message": fmt.Sprintf("the forward to node %d, which leads, was cut: %v; retry", leader, err)})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(body)
}
