package chaos

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/client"
)

// Each listener holds at most its cap: the next connection is refused at
// once (HTTP listeners answer 503 and close; Kafka closes), counted, and
// the connections already open keep working; a slot freed by a close is
// taken by the next client.
func TestConnectionCapsRefuseTheNext(t *testing.T) {
	const limit = 4
	p := serve(t, 0, "--http-max-connections", fmt.Sprint(limit), "--sqs-max-connections", fmt.Sprint(limit),
		"--kafka-max-connections", fmt.Sprint(limit))
	var httpHeld, sqsHeld []*httpConn
	for range limit {
		for _, l := range []struct {
			name string
			held *[]*httpConn
		}{{"http", &httpHeld}, {"sqs", &sqsHeld}} {
			c := dialHTTP(t, p.Addr(l.name))
			if status, body := c.get("/healthz"); status == 0 || status == 503 {
				t.Fatalf("%s connection under the cap: %d %s", l.name, status, body)
			}
			*l.held = append(*l.held, c)
		}
		mustKafka(t, p.Addr("kafka"))
	}
	for _, l := range []string{"http", "sqs"} {
		status, closed := refusedHTTP(t, p.Addr(l))
		if status != http.StatusServiceUnavailable || !closed {
			t.Errorf("%s connection over the cap: status %d, closed %v; want 503 and closed", l, status, closed)
		}
	}
	k, err := dialKafka(p.Addr("kafka"))
	if err != nil {
		t.Fatal(err)
	}
	if !closedWithin(k.nc, 3*time.Second) {
		t.Error("kafka connection over the cap not closed")
	}
	k.nc.Close()
	if status, _ := httpHeld[0].get("/readyz"); status != 200 {
		t.Errorf("held connection after the refusals: /readyz %d", status)
	}
	_, scrape := httpHeld[0].get("/metrics")
	for _, l := range []string{"http", "sqs", "kafka"} {
		if n := metric(scrape, "sluice_connections_refused_total", l); n != 1 {
			t.Errorf("%s refusals counted: %v, want 1", l, n)
		}
		if n := metric(scrape, "sluice_connections_open", l); n != limit {
			t.Errorf("%s connections open: %v, want %d", l, n, limit)
		}
	}
	sqsHeld[0].nc.Close()
	waitUntil(t, "the SQS slot to be freed", func() bool {
		_, scrape := httpHeld[0].get("/metrics")
		return metric(scrape, "sluice_connections_open", "sqs") == limit-1
	})
	if status, _ := dialHTTP(t, p.Addr("sqs")).get("/healthz"); status == 0 || status == 503 {
		t.Errorf("new SQS client after a slot was freed: %d", status)
	}
	t.Logf("figures: cap %d per listener; the %dth connection refused on http (503), sqs (503) and kafka (closed)", limit, limit+1)
}

// refusedHTTP reads what the server says to a new connection before it has
// asked anything.
func refusedHTTP(t *testing.T, addr string) (int, bool) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetReadDeadline(time.Now().Add(3 * time.Second))
	br := bufio.NewReader(nc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, false
	}
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, closedWithin(nc, 3*time.Second)
}

// Request smuggling through an over-limit body, on both HTTP listeners: the
// body's bytes past what the limit reads are a complete CreateQueue
// request (Connect JSON on the native port, SQS JSON on the SQS port),
// then filler past what net/http discards to keep a connection. Issue 13
// found the hidden request run on the native port. It must not run on
// either, and the connection must close after one answer.
func TestSmugglingThroughAnOverLimitBody(t *testing.T) {
	const nativeLimit = 64 << 10
	const sqsLimit = 8 << 20 // the SQS handler's own (sqs.DefaultMaxRequestBytes)
	p := serve(t, 0, "--max-request-bytes", "64KiB")
	c := client.New("http://" + p.Addr("http"))
	native := func(q string) string {
		js := fmt.Sprintf(`{"name":%q}`, q)
		return fmt.Sprintf("POST /sluice.v1.QueueService/CreateQueue HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(js), js)
	}
	sqs := func(q string) string {
		js := fmt.Sprintf(`{"QueueName":%q}`, q)
		return fmt.Sprintf("POST / HTTP/1.1\r\nHost: localhost\r\nX-Amz-Target: AmazonSQS.CreateQueue\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: %d\r\n\r\n%s", len(js), js)
	}
	cases := []struct {
		name, listener, head string
		limit                int
		hidden               func(string) string
	}{
		{"native connect", "http", "POST /sluice.v1.QueueService/CreateQueue HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n", nativeLimit, native},
		{"native health", "http", "GET /healthz HTTP/1.1\r\nHost: localhost\r\n", nativeLimit, native},
		{"sqs", "sqs", "POST / HTTP/1.1\r\nHost: localhost\r\nX-Amz-Target: AmazonSQS.CreateQueue\r\nContent-Type: application/x-amz-json-1.0\r\n", sqsLimit, sqs},
	}
	for i, tc := range cases {
		for _, chunked := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/chunked=%v", tc.name, chunked), func(t *testing.T) {
				queue := fmt.Sprintf("smuggled-%d-%v", i, chunked)
				body := strings.Repeat(" ", tc.limit+1) + tc.hidden(queue) + strings.Repeat("\r\n", 200<<10)
				req := tc.head + fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body)
				if chunked {
					req = tc.head + fmt.Sprintf("Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(body), body)
				}
				status, extra, closed := exchange(t, p.Addr(tc.listener), req)
				if _, err := c.GetQueue(t.Context(), queue); !errors.Is(err, client.ErrQueueNotFound) {
					t.Errorf("the hidden CreateQueue ran: GetQueue(%s) = %v", queue, err)
				}
				if extra != "" {
					t.Errorf("a second answer on the connection:\n%.200s", extra)
				}
				if status != http.StatusRequestEntityTooLarge || !closed {
					t.Errorf("status %d, closed %v; want 413 and closed", status, closed)
				}
			})
		}
	}
}

// exchange sends req on a new connection and reads one answer: its status,
// whatever came after it, and whether the server then closed.
func exchange(t *testing.T, addr, req string) (int, string, bool) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	go func() { _, _ = io.WriteString(nc, req) }() // ends when nc is closed
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(nc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	rest, err := io.ReadAll(br)
	var ne net.Error
	return resp.StatusCode, string(rest), !(errors.As(err, &ne) && ne.Timeout())
}
