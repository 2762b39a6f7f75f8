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

// guardBody bounds r's body in size (limit bytes; 0: no bound, the handler
// has its own) and in time (timeout from now, once the headers are read;
// 0: no bound), and returns the request the handler must see. It answers
// 413 itself, before any handler runs, when the declared length is over
// the limit, and then returns ok false.
//
// Two things keep the tail of an over-limit body from being read as the
// next request on the connection (request smuggling): the size limit
// reports to net/http's own ResponseWriter (raw), which then closes the
// connection after the answer, and the handler gets a shallow copy of r, so
// net/http still sees its own body type at the end of the request and
// knows whether the body was read to its end. Replacing r.Body in place
// hid both: the tail of a body Connect had closed early was parsed as a
// new request.
//
// The time limit is a read deadline on the connection (HTTP/1) or the
// stream (HTTP/2), cleared once the body has been read to its end or
// closed: a long poll that waits after reading its request must not be cut
// off, and HTTP/1's background read, which watches for the client going
// away during that wait, must not see the deadline either.
//
// refuse, when the guard refuses the body (413 over the limit, 408 too
// slow), is told the status; it may be nil.
func guardBody(w, raw http.ResponseWriter, r *http.Request, limit int64, timeout time.Duration, refuse func(int)) (*http.Request, bool) {
	if limit > 0 && r.ContentLength > limit {
		closeAfter(w, r)
		http.Error(w, fmt.Sprintf("request body of %d bytes is over the limit of %d bytes", r.ContentLength, limit),
			http.StatusRequestEntityTooLarge)
		return nil, false
	}
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 || (limit <= 0 && timeout <= 0) {
		return r, true
	}
	rc := http.NewResponseController(raw)
	if timeout > 0 {
		// An error means the writer cannot set deadlines (a test
		// recorder); the request is then served without the bound.
		_ = rc.SetReadDeadline(time.Now().Add(timeout))
	}
	body := r.Body
	if limit > 0 {
		body = http.MaxBytesReader(raw, body, limit)
	}
	if refuse == nil {
		refuse = func(int) {}
	}
	r2 := new(http.Request)
	*r2 = *r
	r2.Body = &guardedBody{body: body, rc: rc, refuse: refuse, timed: timeout > 0}
	return r2, true
}

// closeAfter asks net/http to close an HTTP/1 connection after this
// answer. HTTP/2 has no such header and needs none: its framing cannot be
// smuggled through.
func closeAfter(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 1 {
		w.Header().Set("Connection", "close")
	}
}

// guardedBody is the body a handler reads through guardBody. It records
// why a read failed, so the answer can say so (413, 408), and lifts the
// read deadline once the body is done.
type guardedBody struct {
	body   io.ReadCloser
	rc     *http.ResponseController
	refuse func(status int)
	timed  bool
	done   atomic.Bool // the deadline was lifted, or must stay (a timeout)
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
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		b.refuse(http.StatusRequestEntityTooLarge)
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.refuse(http.StatusRequestTimeout)
		b.done.Store(true) // the connection is closing; leave the deadline
		return
	}
	if b.timed && !b.done.Swap(true) {
		_ = b.rc.SetReadDeadline(time.Time{})
	}
}
