package api_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/api"
	"github.com/sluice-mq/sluice/internal/broker"
)

// TestPeerNamesThePrincipal: on a stream a peer opened over the cluster transport
// (api.FromPeer), a forwarded call is made as the principal the peer names, and the
// leader's own rules still decide what that principal may do; on any other connection the
// same header names nobody.
func TestPeerNamesThePrincipal(t *testing.T) {
	f, h := newAuthAPI(t)
	if _, err := f.b.CreateQueue(broker.QueueSettings{Name: "orders"}); err != nil {
		t.Fatal(err)
	}
	peer := httptest.NewUnstartedServer(h)
	peer.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context { return api.FromPeer(ctx, 2) }
	peer.Start()
	t.Cleanup(peer.Close)
	plain := httptest.NewServer(h)
	t.Cleanup(plain.Close)

	call := func(base, method, body string, hdr map[string]string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/sluice.v1.QueueService/"+method, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Sluice-Forwarded-By", "2")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	send := `{"queue":"orders","messages":[{"body":"aGk="}]}`
	receive := `{"queue":"orders","maxWait":"0s"}`
	as := func(p string) map[string]string { return map[string]string{"Sluice-Forwarded-Principal": p} }
	for _, c := range []struct {
		name, base, method, body string
		hdr                      map[string]string
		want                     int
	}{
		{"carol named by a peer may receive", peer.URL, "Receive", receive, as("carol"), 200},
		{"carol named by a peer may not send: the leader's rules", peer.URL, "SendBatch", send, as("carol"), 403},
		{"alice named by a peer may send", peer.URL, "SendBatch", send, as("alice"), 200},
		{"a name escaped as the forwarder does", peer.URL, "Receive", receive, as("car%6Fl"), 200},
		{"a name that does not unescape", peer.URL, "Receive", receive, as("%zz"), 401},
		{"named on a client's connection: nobody", plain.URL, "Receive", receive, as("carol"), 401},
		{"named on a client's connection beside a token: the token's", plain.URL, "SendBatch", send,
			map[string]string{"Sluice-Forwarded-Principal": "alice", "Authorization": "Bearer " + bobToken}, 403},
		{"a peer naming nobody: its token is checked", peer.URL, "SendBatch", send,
			map[string]string{"Authorization": "Bearer " + aliceToken}, 200},
		{"a peer naming nobody and no token", peer.URL, "Receive", receive, nil, 401},
	} {
		if got, body := call(c.base, c.method, c.body, c.hdr); got != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, got, body, c.want)
		}
	}
	// A principal the forwarding node allowed and this one does not: the refusal says the
	// users files differ.
	if got, body := call(peer.URL, "SendBatch", send, as("carol")); got != 403 || !strings.Contains(body, "allowed by node 2") ||
		!strings.Contains(body, "same --auth-file") || !strings.Contains(body, "PERMISSION_DENIED") {
		t.Errorf("a vouched principal refused here: %d %s, want 403 saying the users files differ, reason kept", got, body)
	}
	// A forwarded call whose token the leader does not know: the node that forwarded it
	// took it, so the answer says the users files differ.
	if got, body := call(plain.URL, "Receive", receive, map[string]string{"Authorization": "Bearer sl_not-here"}); got != 401 ||
		!strings.Contains(body, "forwarded by node 2") || !strings.Contains(body, "same --auth-file") {
		t.Errorf("a forwarded call with a token unknown here: %d %s, want 401 saying the users files differ", got, body)
	}
}
