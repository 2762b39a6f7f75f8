package console

import (
	"bytes"
	"context"
	"io"
	"net/http"
)

// inProcess is an http.RoundTripper that hands each request straight to
// the native API's handler: the console's calls go through the same
// Connect handlers and interceptors (authentication, authorization,
// metrics, limits) as any client's, without a socket, a TLS handshake or
// knowing which address the API listens on. Only unary calls are made, so
// the whole answer is buffered.
type inProcess struct{ h http.Handler }

type peerKey struct{}

// withPeer carries the browser's address into the API's request, so its
// refusal log names who was refused, not the console.
func withPeer(ctx context.Context, addr string) context.Context {
	return context.WithValue(ctx, peerKey{}, addr)
}

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	if r.Body == nil {
		r.Body = http.NoBody
	}
	r.RequestURI = r.URL.RequestURI()
	if peer, ok := req.Context().Value(peerKey{}).(string); ok {
		r.RemoteAddr = peer
	}
	w := &recorder{header: http.Header{}}
	t.h.ServeHTTP(w, r)
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return &http.Response{
		Status: http.StatusText(w.status), StatusCode: w.status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.header, Body: io.NopCloser(&w.body), ContentLength: int64(w.body.Len()), Request: req,
	}, nil
}

// recorder is the ResponseWriter of one in-process call.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *recorder) Header() http.Header { return w.header }

func (w *recorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *recorder) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}

func (w *recorder) Flush() {}
