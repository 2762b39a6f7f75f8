package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// bodyGuard is how one request's body is bounded: in size (limit bytes; 0
// leaves the size to the handler) and in time (timeout from the end of the
// headers; 0: none).
//
// Over the limit, the request is refused and its connection closed, so the
// tail of the body is never read as the next request (request smuggling).
// Two details make that hold: the size limit reports to net/http's own
// ResponseWriter (raw), which then closes the connection after the answer,
// and the handler gets a shallow copy of the request, so net/http still
// sees its own body at the end of the request and knows whether it was
// read to its end. Replacing r.Body in place hid both: the tail of a body
// Connect had closed early was parsed as a new request.
//
// The time limit is a read deadline on the connection (HTTP/1) or the
// stream (HTTP/2), set only when there is a body, and lifted once the body
// has been read to its end or closed. A long poll waits after reading its
// request, and HTTP/1's background read, which watches for the client
// going away during that wait, must never see a deadline: it would cancel
// the request. (net/http clears the deadline itself when it starts that
// read after a body's end, and starts it before the handler when there is
// no body, which is why a request without one gets no deadline here.)
type bodyGuard struct {
	limit   int64
	timeout time.Duration
	// ownAnswer says whether the handler of r answers an over-limit
	// body in its own protocol (a front-end's RPC: Connect's
	// resource_exhausted); if not, the guard answers 413 itself.
	ownAnswer func(r *http.Request) bool
	// refuse is told the status when a body is refused (413 over the
	// limit, 408 too slow), so the answer can carry it.
	refuse func(r *http.Request, status int)
}

// apply returns the request the handler must see, or false if the guard
// answered r itself.
func (g bodyGuard) apply(w, raw http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 || (g.limit <= 0 && g.timeout <= 0) {
		return r, true
	}
	// The copy, its body and the body's controller in one allocation:
	// they were four, on every request with a body.
	gr := new(guardedRequest)
	body := &gr.body
	body.rc = *http.NewResponseController(raw)
	if g.timeout > 0 {
		// An error means the writer cannot set deadlines (a test
		// recorder); the request is then served without the bound.
		_ = body.rc.SetReadDeadline(time.Now().Add(g.timeout))
	}
	gr.req = *r
	r2 := &gr.req
	body.body, body.timed, body.refuse, body.req = r.Body, g.timeout > 0, g.refuse, r
	r2.Body = body
	if g.limit <= 0 || g.limitBody(w, raw, r, body) {
		return r2, true
	}
	return nil, false
}

// limitBody puts body under the size limit, or answers r itself (413, or
// 408 for a body too slow to measure) and returns false.
func (g bodyGuard) limitBody(w, raw http.ResponseWriter, r *http.Request, body *guardedBody) bool {
	own := g.ownAnswer != nil && g.ownAnswer(r)
	switch {
	case r.ContentLength > g.limit:
		// Declared over the limit: refused before a byte is read.
		announceTooLarge(raw, r)
		if !own {
			refuseBody(w, r, http.StatusRequestEntityTooLarge, g.limit)
			return false
		}
		g.refuse(r, http.StatusRequestEntityTooLarge)
		body.body = tooLarge{limit: g.limit}
	case !own && r.ContentLength < 0:
		// The server's own handlers read no body, so a chunked one is
		// measured here, where its size can still be refused.
		body.body = http.MaxBytesReader(raw, r.Body, g.limit)
		if _, err := io.Copy(io.Discard, body); err != nil {
			status := http.StatusRequestTimeout
			if tooBig := new(http.MaxBytesError); errors.As(err, &tooBig) {
				status = http.StatusRequestEntityTooLarge
			}
			refuseBody(w, r, status, g.limit)
			return false
		}
	default:
		body.body = http.MaxBytesReader(raw, r.Body, g.limit)
	}
	return true
}

// refuseBody answers a refused body in plain text and closes.
func refuseBody(w http.ResponseWriter, r *http.Request, status int, limit int64) {
	closeAfter(w, r)
	msg := "request body too slow"
	if status == http.StatusRequestEntityTooLarge {
		msg = fmt.Sprintf("request body is over the limit of %d bytes", limit)
	}
	http.Error(w, msg, status)
}

// announceTooLarge tells net/http that r's body is over the limit, through
// the same path http.MaxBytesReader takes, by reading one byte past a
// limit of zero: net/http then closes the connection after the answer, and
// first lingers so the client reads the answer before the close resets
// the connection under the body it is still sending. A client that
// expects 100-continue has sent nothing yet and must not be asked to.
func announceTooLarge(raw http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor != 1 || r.Header.Get("Expect") != "" {
		return
	}
	var b [1]byte
	_, _ = http.MaxBytesReader(raw, r.Body, 0).Read(b[:])
}

// tooLarge is the body a handler reads when the declared length was over
// the limit: nothing, and the error http.MaxBytesReader gives.
type tooLarge struct{ limit int64 }

func (t tooLarge) Read([]byte) (int, error) { return 0, &http.MaxBytesError{Limit: t.limit} }
func (t tooLarge) Close() error             { return nil }

// closeAfter asks net/http to close an HTTP/1 connection after this
// answer. HTTP/2 has no such header and needs none: its framing cannot be
// smuggled through.
func closeAfter(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 1 {
		w.Header().Set("Connection", "close")
	}
}

// guardedBody is the body a handler reads through a bodyGuard. It records
// why a read failed, so the answer can say so, and lifts the read deadline
// once the body is done.
type guardedBody struct {
	body   io.ReadCloser
	rc     http.ResponseController
	refuse func(r *http.Request, status int) // the guard's, told about req
	req    *http.Request                     // the request as net/http has it
	timed  bool
	done   atomic.Bool // the deadline was lifted, or must stay (a timeout)
}

// guardedRequest is what a bodyGuard hands a handler: a shallow copy of the
// request, whose Body is body.
type guardedRequest struct {
	req  http.Request
	body guardedBody
}

func (b *guardedBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if err != nil {
		b.finish(err)
	}
	return n, err
}

func (b *guardedBody) Close() error {
	b.finish(nil)
	return b.body.Close()
}

func (b *guardedBody) finish(err error) {
	if err == nil || err == io.EOF {
		// Every request's end: the errors.As below allocates its target
		// on each call (12 % of the objects the server allocated under W2
		// over SQS), so the common case does not reach it.
		b.lift()
		return
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		b.refuse(b.req, http.StatusRequestEntityTooLarge)
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.refuse(b.req, http.StatusRequestTimeout)
		b.done.Store(true) // the connection is closing; leave the deadline
		return
	}
	b.lift()
}

// lift clears the body's read deadline, once.
func (b *guardedBody) lift() {
	if b.timed && !b.done.Swap(true) {
		_ = b.rc.SetReadDeadline(time.Time{})
	}
}
