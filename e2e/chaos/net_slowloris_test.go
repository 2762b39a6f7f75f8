package chaos

import (
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Slowloris on both HTTP listeners (native and SQS): clients that send
// their headers, or their body, a byte every 100 ms. Issue 13 found 20 of
// 20 body-slowloris connections still open after 40 s. Each must now be
// closed within the read timeouts (500 ms here), plus scheduling slack.
func TestSlowlorisIsCutOff(t *testing.T) {
	const timeout = 500 * time.Millisecond
	clients, slack := 20, 2*time.Second
	if long() {
		clients = 200
	}
	p := serve(t, 0, "--read-header-timeout", timeout.String(), "--read-body-timeout", timeout.String())
	heads := map[string]string{ // %s: the path
		"headers": "POST %s HTTP/1.1\r\nHost: localhost\r\n",
		"body":    "POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n",
	}
	paths := map[string]string{"http": "/sluice.v1.QueueService/CreateQueue", "sqs": "/"}
	for _, listener := range []string{"http", "sqs"} {
		for kind, head := range heads {
			t.Run(listener+"/"+kind, func(t *testing.T) {
				head := fmt.Sprintf(head, paths[listener])
				var mu sync.Mutex
				var open int
				var slowest time.Duration
				var wg sync.WaitGroup
				for range clients {
					wg.Go(func() {
						took, closed := trickle(p.Addr(listener), head, kind == "body", timeout+slack)
						mu.Lock()
						defer mu.Unlock()
						slowest = max(slowest, took)
						if !closed {
							open++
						}
					})
				}
				wg.Wait()
				t.Logf("figures: %s listener, %d %s-slowloris clients: %d still open after %s, slowest closed after %s",
					listener, clients, kind, open, timeout+slack, slowest.Round(time.Millisecond))
				if open > 0 {
					t.Errorf("%d of %d connections still open after %s", open, clients, timeout+slack)
				}
			})
		}
	}
}

// trickle sends head, then one byte every 100 ms (a header line's, or the
// body's), until the server closes the connection or giveUp passes.
func trickle(addr, head string, body bool, giveUp time.Duration) (time.Duration, bool) {
	begin := time.Now()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, false
	}
	defer nc.Close()
	if _, err := io.WriteString(nc, head); err != nil {
		return time.Since(begin), true
	}
	closed := make(chan struct{})
	go func() { // ends when the server closes, or at giveUp
		defer close(closed)
		closedWithin(nc, giveUp)
	}()
	line := []byte("X-Slow: yes\r\n")
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-closed:
			took := time.Since(begin)
			return took, took < giveUp
		case <-tick.C:
			b := line[i%len(line)]
			if body {
				b = 'a'
			}
			_, _ = nc.Write([]byte{b}) // a failure means closed: the reader says so
		}
	}
}
