package server

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// pipeListener hands out the server ends of net.Pipe connections, as the cluster
// transport hands a node its peers' streams.
type pipeListener struct {
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}
func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *pipeListener) Addr() net.Addr { return &net.UnixAddr{Name: "pipe", Net: "pipe"} }

type peerKey struct{}

// TestServeNodeHTTP: the routes of the HTTP listeners are served on a listener the process
// feeds itself, with connCtx's values in every request's context, without the Host guard
// (a peer's Host names no listener), counted in the listener's metrics, and drained at
// shutdown like the others.
func TestServeNodeHTTP(t *testing.T) {
	s, _ := newTestServer(t, testConfig(t))
	got := make(chan any, 1)
	s.RegisterHTTP("GET /probe", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Context().Value(peerKey{})
		_, _ = w.Write([]byte("ok"))
	}))
	ln := &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
	start(t, s)
	s.ServeNodeHTTP(ln, func(ctx context.Context, _ net.Conn) context.Context { return context.WithValue(ctx, peerKey{}, 2) })
	client, server := net.Pipe()
	defer client.Close()
	ln.conns <- server
	_ = client.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := client.Write([]byte("GET /probe HTTP/1.1\r\nHost: node-1.sluice-peer\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(client), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("a peer's request: %d", resp.StatusCode)
	}
	if v := <-got; v != 2 {
		t.Errorf("the request's context had %v from connCtx, want 2", v)
	}
	_, rec := get(t, "http://"+s.Addr(HTTP)+"/metrics")
	for _, want := range []string{`sluice_connections_accepted_total{listener="cluster-http"} 1`, `sluice_connections_open{listener="cluster-http"} 1`} {
		if !strings.Contains(rec, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
