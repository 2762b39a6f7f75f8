package server_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/sluicetest"
)

// The smuggling attack on the real native API: an over-limit body whose
// tail, from the byte where the limit stops reading, is a complete
// CreateQueue request. Through every path (Connect JSON and protobuf,
// gRPC-Web, gRPC framing over HTTP/1.1, health, metrics), declared or
// chunked, the hidden CreateQueue must not run and the connection must be
// closed after one answer.
func TestSmuggledCreateQueueDoesNotRun(t *testing.T) {
	const limit = 64 << 10
	srv := sluicetest.Start(t, sluicetest.WithMaxRequestBytes(limit))
	c := client.New(srv.URL)
	paths := []struct{ name, method, path, contentType string }{
		{"connect-json", "POST", "/sluice.v1.QueueService/CreateQueue", "application/json"},
		{"connect-proto", "POST", "/sluice.v1.QueueService/CreateQueue", "application/proto"},
		{"grpc-web", "POST", "/sluice.v1.QueueService/CreateQueue", "application/grpc-web+proto"},
		{"grpc", "POST", "/sluice.v1.QueueService/CreateQueue", "application/grpc"},
		{"healthz", "GET", "/healthz", "text/plain"},
		{"metrics", "GET", "/metrics", "text/plain"},
	}
	i := 0
	for _, p := range paths {
		for _, chunked := range []bool{false, true} {
			i++
			queue := fmt.Sprintf("smuggled-%d", i)
			t.Run(fmt.Sprintf("%s/chunked=%v", p.name, chunked), func(t *testing.T) {
				status, extra, closed := exchange(t, srv.Addr, smuggle(p.method, p.path, p.contentType, limit, queue, chunked))
				if extra != "" {
					t.Errorf("a second answer on the connection (the tail was parsed):\n%.300s", extra)
				}
				if !closed {
					t.Error("connection not closed after the over-limit body")
				}
				if _, err := c.GetQueue(t.Context(), queue); !errors.Is(err, client.ErrQueueNotFound) {
					t.Errorf("the hidden CreateQueue ran: GetQueue(%s) = %v", queue, err)
				}
				// gRPC answers 200 and carries its error in trailers.
				want := http.StatusRequestEntityTooLarge
				if strings.HasPrefix(p.contentType, "application/grpc") {
					want = http.StatusOK
				}
				if status != want {
					t.Errorf("status %d, want %d", status, want)
				}
			})
		}
	}
}

// A client whose message is over the limit gets the documented answer,
// resource_exhausted (REQUEST_TOO_LARGE), in every protocol, and its next
// call works.
func TestOverLimitMessageIsRequestTooLarge(t *testing.T) {
	const limit = 64 << 10
	srv := sluicetest.Start(t, sluicetest.WithMaxRequestBytes(limit))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if _, err := client.New(srv.URL).CreateQueue(ctx, "q", nil); err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]client.Protocol{"connect": client.ProtocolConnect, "connect-json": client.ProtocolConnectJSON,
		"grpc": client.ProtocolGRPC, "grpc-web": client.ProtocolGRPCWeb} {
		t.Run(name, func(t *testing.T) {
			c := client.New(srv.URL, client.WithProtocol(p))
			_, err := c.Send(ctx, "q", make([]byte, 2*limit))
			if connect.CodeOf(err) != connect.CodeResourceExhausted || !errors.Is(err, client.ErrRequestTooLarge) {
				t.Errorf("over-limit send: %v (code %s), want resource_exhausted, REQUEST_TOO_LARGE", err, connect.CodeOf(err))
			}
			if _, err := c.Send(ctx, "q", []byte("small")); err != nil {
				t.Errorf("next send: %v", err)
			}
		})
	}
}

// smuggle builds the attack: the first limit+1 bytes of the body are
// padding (what the limit reads), then the hidden request, then filler
// past what net/http would discard to keep the connection.
func smuggle(method, path, contentType string, limit int, queue string, chunked bool) string {
	js := fmt.Sprintf(`{"name":%q}`, queue)
	hidden := fmt.Sprintf("POST /sluice.v1.QueueService/CreateQueue HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(js), js)
	body := strings.Repeat(" ", limit+1) + hidden + strings.Repeat("\r\n", 200<<10)
	if strings.HasPrefix(contentType, "application/grpc") { // one envelope, declaring it all
		body = fmt.Sprintf("\x00%c%c%c%c", byte(len(body)>>24), byte(len(body)>>16), byte(len(body)>>8), byte(len(body))) + body
	}
	head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: %s\r\n", method, path, contentType)
	if chunked {
		return head + fmt.Sprintf("Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(body), body)
	}
	return head + fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body)
}

// exchange sends req on a new connection and reads one answer. extra is
// whatever came after it; closed, whether the server closed the
// connection within 5 s.
func exchange(t *testing.T, addr, req string) (status int, extra string, closed bool) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	go func() { _, _ = io.WriteString(nc, req) }() // ends when nc is closed
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(nc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	rest, err := io.ReadAll(br)
	var ne net.Error
	timedOut := errors.As(err, &ne) && ne.Timeout()
	return resp.StatusCode, string(rest), !timedOut
}
