package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-mq/sluice/internal/broker"
)

// TestClusterStatusAndTransfer: `sluice cluster status` through any node shows the three
// nodes alive, a controller, and every partition hosted there with a leader; and
// `sluice cluster transfer-leader`, asked of a follower, moves a partition's leadership to
// the node named.
func TestClusterStatusAndTransfer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three sluice processes")
	}
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := kadm.NewClient(c.client())
	createTopic(ctx, t, adm, "st", 2, 3)

	var st broker.ClusterStatus
	for {
		out := c.cli(t, 2, "cluster", "status", "-o", "json")
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("cluster status -o json: %v\n%s", err, out)
		}
		if len(st.Partitions) == 2 && st.Partitions[0].Leader != 0 && st.Partitions[1].Leader != 0 && st.Controller != 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no leaders: %+v", st)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if st.Node != 2 || len(st.Nodes) != 3 {
		t.Fatalf("status from node 2: %+v", st)
	}
	for _, n := range st.Nodes {
		if !n.Alive || n.KafkaAddr == "" || n.HTTPAddr == "" {
			t.Errorf("node %+v: want alive with its addresses", n)
		}
	}
	c.checkConsoleClusterPage(t, 2, int(st.Controller), "st")
	// Move st/0 to a node that does not lead it, asking a node that does not lead it.
	from := int(st.Partitions[0].Leader)
	to := 1 + from%3
	via := 1 + to%3
	if via == from {
		via = 1 + via%3
	}
	c.cli(t, via, "cluster", "transfer-leader", "st", "0", "--to", itoa(to))
	for c.leaderOf(ctx, adm, "st", 0) != to {
		if ctx.Err() != nil {
			t.Fatalf("st/0 still led by %d, want %d", c.leaderOf(ctx, adm, "st", 0), to)
		}
		time.Sleep(100 * time.Millisecond)
	}
	checkReregistered(ctx, t, c, via)
}

// checkReregistered restarts node id on a new HTTP port (the harness listens on
// 127.0.0.1:0) and waits until another node's status lists it under the new address: a
// node registers its addresses again whenever the catalog holds other ones
// (internal/node's register), or forwards inside the cluster would go to the old port.
func checkReregistered(ctx context.Context, t *testing.T, c *cluster, id int) {
	t.Helper()
	old := c.procs[id-1].Addr("http")
	c.kill(id)
	c.start(id)
	addr := c.procs[id-1].Addr("http")
	if addr == old {
		t.Skipf("node %d came back on its old port %s: nothing to re-register", id, addr)
	}
	other := 1 + id%3
	for {
		var st broker.ClusterStatus
		out := c.cli(t, other, "cluster", "status", "-o", "json")
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("cluster status -o json: %v\n%s", err, out)
		}
		for _, n := range st.Nodes {
			if int(n.ID) == id && n.HTTPAddr == addr {
				return
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("node %d restarted on %s; node %d still lists %+v", id, addr, other, st.Nodes)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// cli runs the sluice CLI against node id's native API and returns its output.
func (c *cluster) cli(t *testing.T, id int, args ...string) string {
	t.Helper()
	server := "http://" + c.procs[id-1].Addr("http")
	out, err := exec.Command(c.bin, append(args, "--server", server)...).CombinedOutput()
	if err != nil {
		t.Fatalf("sluice %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func itoa(n int) string { return strconv.Itoa(n) }
