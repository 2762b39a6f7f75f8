package server

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// smuggled builds a request whose body is over limit and whose bytes past
// limit+1 are a complete request for /hidden, followed by enough filler
// that the server cannot just discard the rest (net/http reads at most
// 256 KiB of an unread body to keep a connection). A server that parses
// the tail as a new request serves /hidden.
func smuggled(method, path, contentType string, limit int, chunked bool) string {
	hidden := "POST /hidden HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\n{}"
	body := strings.Repeat("a", limit+1) + hidden + strings.Repeat("\r\n", 200<<10)
	head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: %s\r\n", method, path, contentType)
	if chunked {
		return head + fmt.Sprintf("Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(body), body)
	}
	return head + fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body)
}

// An over-limit body is refused with 413 and its connection closed, so its
// tail is never read as another request: on the declared length (refused
// before a byte is read) and on a chunked body (found while reading),
// through a front-end's handler that reads and closes the body as Connect
// does, through the server's own handlers that never read it (health,
// metrics), and on a path nobody serves.
func TestOverLimitBodyIsNotSmuggled(t *testing.T) {
	const limit = 1024
	cfg := testConfig(t)
	cfg.MaxRequestBytes = limit
	s, _ := newTestServer(t, cfg)
	var mu sync.Mutex
	var hidden int
	s.RegisterHTTP("POST /hidden", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hidden++
		mu.Unlock()
	}))
	// Like Connect's unary handler: read what the limit allows, answer
	// with its own error, close the body.
	s.RegisterHTTP("POST /rpc", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			http.Error(w, err.Error(), http.StatusTooManyRequests)
		}
	}))
	start(t, s)
	for _, tc := range []struct{ name, method, path string }{
		{"rpc", "POST", "/rpc"},
		{"healthz", "GET", "/healthz"},
		{"readyz", "GET", "/readyz"},
		{"metrics", "GET", "/metrics"},
		{"unknown path", "POST", "/nowhere"},
	} {
		for _, chunked := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/chunked=%v", tc.name, chunked), func(t *testing.T) {
				mu.Lock()
				hidden = 0
				mu.Unlock()
				status, closed := sendRaw(t, s.Addr(HTTP), smuggled(tc.method, tc.path, "application/json", limit, chunked))
				mu.Lock()
				n := hidden
				mu.Unlock()
				if n != 0 {
					t.Fatalf("the request hidden in the body ran %d times", n)
				}
				if !closed {
					t.Error("connection left open after an over-limit body")
				}
				if status != http.StatusRequestEntityTooLarge {
					t.Errorf("status %d, want 413", status)
				}
			})
		}
	}
}

// sendRaw writes req on a new connection and reads one response; closed
// says whether the server then closed the connection (within 3 s).
func sendRaw(t *testing.T, addr, req string) (status int, closed bool) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	go func() { _, _ = io.WriteString(nc, req) }() // ends when nc closes
	nc.SetReadDeadline(time.Now().Add(3 * time.Second))
	br := bufio.NewReader(nc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// Whatever else arrives is another response: the tail was parsed.
	rest, err := io.ReadAll(br)
	if len(rest) > 0 {
		t.Errorf("more after the response (the tail was parsed as requests):\n%.300s", rest)
	}
	var ne net.Error
	return resp.StatusCode, err == nil || !(errorsAs(err, &ne) && ne.Timeout())
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }
