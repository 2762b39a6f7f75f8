package node_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/node"
	"github.com/sluice-mq/sluice/internal/server"
)

// TestAdminRefusesOtherSites: a cluster admin call a browser sent for a page of another
// site (a form post, whose JSON body the endpoint would decode all the same) is refused
// 403 before it does anything; the same call without the browser's headers, as the CLI
// sends it, goes through to the endpoint (whatever a single node answers then: not 403).
func TestAdminRefusesOtherSites(t *testing.T) {
	srv := startNode(t)
	base := "http://" + srv.Addr(server.HTTP)
	for _, tc := range []struct {
		name, method, path string
		headers            map[string]string
		want               int
	}{
		{"form post from another site", "POST", node.ClusterElectPath, map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"}, http.StatusForbidden},
		{"another origin alone", "POST", node.ClusterNodesPath, map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"same-site, another port", "DELETE", node.ClusterNodesPath + "/3", map[string]string{"Sec-Fetch-Site": "same-site"}, http.StatusForbidden},
		{"the CLI", "POST", node.ClusterElectPath, nil, 0},
		{"same origin", "POST", node.ClusterElectPath, map[string]string{"Sec-Fetch-Site": "same-origin"}, 0},
	} {
		req, err := http.NewRequest(tc.method, base+tc.path, strings.NewReader(`{"topic":"t"}`))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range tc.headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if refused := resp.StatusCode == http.StatusForbidden; refused != (tc.want == http.StatusForbidden) {
			t.Errorf("%s: %d, want %s", tc.name, resp.StatusCode, map[bool]string{true: "403", false: "anything but 403"}[tc.want == http.StatusForbidden])
		}
	}
}
