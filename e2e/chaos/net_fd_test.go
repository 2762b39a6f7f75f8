package chaos

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// fdSizes are the fd-exhaustion test's sizes: the open-file limit the
// server runs under, the idle Kafka connections thrown at it (more than
// the limit), and its Kafka idle timeout.
func fdSizes() (nofile, flood int, idle time.Duration) {
	if long() {
		return 1024, 1100, 5 * time.Second // the figures
	}
	return 256, 300, 2 * time.Second
}

// More idle Kafka connections than the server has file descriptors, the
// attack that took sluice offline (issue 13: 1,100 under ulimit -n 1024,
// and /readyz, sends and new connections all timed out).
//
// With the default caps (a quarter of the limit per listener) the flood
// never reaches the limit: the connections past the Kafka cap are refused
// at once, /readyz on a new connection answers at once, nothing fails to
// accept, and once the idle timeout closes the flood a new Kafka client is
// served.
func TestFDExhaustionDefaultCaps(t *testing.T) {
	nofile, flood, idle := fdSizes()
	p := serve(t, nofile, "--kafka-connections-max-idle", idle.String())
	cap := nofile / 4
	if !strings.Contains(p.Logs(), fmt.Sprintf(`"listener":"kafka","addr":"%s","max_connections":%d`, p.Addr("kafka"), cap)) {
		t.Fatalf("the Kafka cap is not a quarter of ulimit -n %d:\n%s", nofile, p.Logs())
	}
	h0 := dialHTTP(t, p.Addr("http"))
	k0 := mustKafka(t, p.Addr("kafka"))
	hold(t, p.Addr("kafka"), flood)

	wantRefused := float64(flood - (cap - 1)) // k0 holds one slot
	var scrape string
	waitUntil(t, "the flood past the cap to be refused", func() bool {
		_, scrape = h0.get("/metrics")
		return metric(scrape, "sluice_connections_refused_total", "kafka") == wantRefused
	})
	begin := time.Now()
	if status, body := get(p.Addr("http"), "/readyz"); status != 200 {
		t.Errorf("/readyz on a new connection during the flood: %d %s", status, body)
	}
	readyzTook := time.Since(begin)
	if err := k0.apiVersions(); err != nil {
		t.Errorf("open Kafka connection during the flood: %v", err)
	}
	if n := metric(scrape, "sluice_accept_errors_total", "kafka"); n != 0 {
		t.Errorf("accept errors: %v, want none (the cap keeps descriptors free)", n)
	}
	recovered := newKafkaClientServed(t, p.Addr("kafka"), idle)
	waitUntil(t, "the idle timeout to close every held connection", func() bool {
		_, scrape = h0.get("/metrics")
		return metric(scrape, "sluice_connections_idle_closed_total", "kafka") >= float64(cap-1)
	})
	t.Logf("figures: ulimit -n %d, kafka cap %d, %d idle connections held: refused %v, accept errors %v, "+
		"idle closed %v, new /readyz answered in %s, new Kafka client served after %s",
		nofile, cap, flood, metric(scrape, "sluice_connections_refused_total", "kafka"),
		metric(scrape, "sluice_accept_errors_total", "kafka"), metric(scrape, "sluice_connections_idle_closed_total", "kafka"),
		readyzTook.Round(time.Millisecond), recovered.Round(time.Millisecond))
}

// The same flood with the caps set above the limit, so the server does
// run out of descriptors: accept fails with EMFILE and backs off, the
// connections already open keep being served (a Kafka request, /readyz
// and /metrics on a keep-alive connection), the failures are counted, and
// once the idle timeout has closed the flood a new HTTP client and a new
// Kafka client are served.
func TestFDExhaustionAcceptBacksOff(t *testing.T) {
	nofile, flood, idle := fdSizes()
	p := serve(t, nofile, "--kafka-connections-max-idle", idle.String(),
		"--kafka-max-connections", "100000", "--http-max-connections", "100000", "--sqs-max-connections", "100000")
	h0 := dialHTTP(t, p.Addr("http"))
	k0 := mustKafka(t, p.Addr("kafka"))
	hold(t, p.Addr("kafka"), flood)

	var scrape string
	waitUntil(t, "accept to fail for lack of descriptors", func() bool {
		_, scrape = h0.get("/metrics")
		return metric(scrape, "sluice_accept_errors_total", "kafka") > 0
	})
	if err := k0.apiVersions(); err != nil {
		t.Errorf("open Kafka connection while accept fails: %v", err)
	}
	if status, body := h0.get("/readyz"); status != 200 {
		t.Errorf("/readyz on an open connection while accept fails: %d %s", status, body)
	}
	begin := time.Now()
	if status, body := getWithin(p.Addr("http"), "/readyz", 3*idle+5*time.Second); status != 200 {
		t.Errorf("/readyz on a new connection: %d %s", status, body)
	}
	readyzTook := time.Since(begin)
	recovered := newKafkaClientServed(t, p.Addr("kafka"), idle)
	_, scrape = h0.get("/metrics")
	t.Logf("figures: ulimit -n %d, %d idle connections held, caps above the limit: accept errors %v (kafka) %v (http), "+
		"idle closed %v, new /readyz answered after %s, new Kafka client served after %s",
		nofile, flood, metric(scrape, "sluice_accept_errors_total", "kafka"), metric(scrape, "sluice_accept_errors_total", "http"),
		metric(scrape, "sluice_connections_idle_closed_total", "kafka"), readyzTook.Round(time.Millisecond), recovered.Round(time.Millisecond))
}

func mustKafka(t *testing.T, addr string) *kafkaConn {
	t.Helper()
	k, err := dialKafka(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.nc.Close() })
	if err := k.apiVersions(); err != nil {
		t.Fatal(err)
	}
	return k
}

// hold opens n connections to addr and leaves them idle until the test
// ends (the server closes them first, at its idle timeout). The kernel
// completes a connection before the server accepts it, so every dial
// succeeds whatever the server does.
func hold(t *testing.T, addr string, n int) {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("dial %d of %d: %v", len(conns)+1, n, err)
		}
		conns = append(conns, c)
	}
}

// newKafkaClientServed connects a new Kafka client and returns how long it
// took to be answered; the idle timeout must free the slots or descriptors
// first, so it gets up to three of them and some seconds.
func newKafkaClientServed(t *testing.T, addr string, idle time.Duration) time.Duration {
	t.Helper()
	begin := time.Now()
	for time.Since(begin) < 3*idle+10*time.Second {
		k, err := dialKafka(addr)
		if err != nil {
			t.Fatal(err)
		}
		err = k.apiVersionsWithin(3*idle + 5*time.Second)
		k.nc.Close()
		if err == nil {
			return time.Since(begin)
		}
		time.Sleep(100 * time.Millisecond) // refused at the cap: closed at once; try again
	}
	t.Fatalf("no new Kafka client served within %s", time.Since(begin))
	return 0
}
