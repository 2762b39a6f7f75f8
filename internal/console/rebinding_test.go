package console_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/sluicetest"
)

// DNS rebinding against a console on loopback without authentication, through the
// whole server as `sluice serve` assembles it: a page whose name was rebound to
// 127.0.0.1 is same-origin to the browser, so its purge passes the console's own
// check (Origin equals Host); the listener refuses it for its Host (421) and the
// queue keeps its message. The same form addressed to 127.0.0.1, localhost or [::1]
// purges, and a page of another site that was not rebound is still refused by the
// console (403). The native API answers a foreign Host the same way.
func TestRebindingRefused(t *testing.T) {
	srv := sluicetest.Start(t)
	c := client.New(srv.URL)
	_, port, _ := net.SplitHostPort(srv.Addr)
	cases := []struct {
		name, host, origin, site string
		status                   int
		purged                   bool
	}{
		{"the tester's rebound page", "evil.example:" + port, "http://evil.example:" + port, "same-origin", http.StatusMisdirectedRequest, false},
		{"a rebound page without Sec-Fetch-Site", "evil.example:" + port, "http://evil.example:" + port, "", http.StatusMisdirectedRequest, false},
		{"a page of another site, not rebound", "127.0.0.1:" + port, "https://evil.example", "cross-site", http.StatusForbidden, false},
		{"the console at 127.0.0.1", "127.0.0.1:" + port, "http://127.0.0.1:" + port, "same-origin", http.StatusSeeOther, true},
		{"the console at localhost", "localhost:" + port, "http://localhost:" + port, "same-origin", http.StatusSeeOther, true},
		{"the console at [::1]", "[::1]:" + port, "http://[::1]:" + port, "same-origin", http.StatusSeeOther, true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			queue := fmt.Sprintf("victim-%d", i)
			if _, err := c.CreateQueue(t.Context(), queue, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Send(t.Context(), queue, []byte("keep me")); err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/ui/queues/"+queue+"/purge",
				strings.NewReader(url.Values{"confirm": {queue}}.Encode()))
			req.Host = tc.host
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", tc.origin)
			if tc.site != "" {
				req.Header.Set("Sec-Fetch-Site", tc.site)
			}
			resp, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("purge: %d %.300s, want %d", resp.StatusCode, body, tc.status)
			}
			q, err := c.GetQueue(t.Context(), queue)
			if err != nil {
				t.Fatal(err)
			}
			if purged := depthOf(q) == 0; purged != tc.purged {
				t.Fatalf("purged: %v, want %v (depth %d)", purged, tc.purged, depthOf(q))
			}
		})
	}
	for _, tc := range []struct {
		host   string
		status int
	}{
		{"evil.example:" + port, http.StatusMisdirectedRequest},
		{"localhost:" + port, http.StatusOK},
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/sluice.v1.QueueService/ListQueues", strings.NewReader("{}"))
		req.Host = tc.host
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("native ListQueues, Host %s: %d %.300s, want %d", tc.host, resp.StatusCode, body, tc.status)
		}
	}
}
