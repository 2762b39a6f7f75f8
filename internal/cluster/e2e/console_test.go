package e2e

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// checkConsoleClusterPage: the web console's cluster page on node id lists the three
// nodes alive, names the controller, and shows the partitions of topic hosted there.
func (c *cluster) checkConsoleClusterPage(t *testing.T, id, controller int, topic string) {
	t.Helper()
	resp, err := http.Get("http://" + c.procs[id-1].Addr("http") + "/ui/cluster")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	page := string(b)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/ui/cluster on node %d: %d\n%s", id, resp.StatusCode, page)
	}
	for _, want := range []string{"node " + strconv.Itoa(id) + "'s view", "the controller (metadata leader) is node " + strconv.Itoa(controller),
		`<a href="/ui/topics/` + topic + `">` + topic + `</a>/0`} {
		if !strings.Contains(page, want) {
			t.Errorf("/ui/cluster on node %d lacks %q", id, want)
		}
	}
	if n := strings.Count(page, "<td>alive</td>"); n != 3 {
		t.Errorf("/ui/cluster on node %d shows %d nodes alive, want 3", id, n)
	}
}
