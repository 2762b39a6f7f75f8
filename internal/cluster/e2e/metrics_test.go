package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestIdleClusterQuiescesAndSeesADeadPeer: three real processes with a topic of 16
// partitions (rf 3) written to, then left alone: every node's /metrics says it hosts the
// 17 groups (the metadata group too) and, within a few seconds, that none is awake (all
// quiesced: no ticks, no heartbeats; what keeps an idle cluster's CPU down). A node
// killed then shows as one peer down on the two others, from the liveness beat alone,
// since no group traffic flows to notice it. The nodes run with --cluster-id: their
// handshakes carry it (the cluster forms) and Kafka's Metadata names it.
func TestIdleClusterQuiescesAndSeesADeadPeer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three sluice processes")
	}
	c := startCluster(t, 3, "--cluster-id", "idle-test")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := kadm.NewClient(c.client())
	createTopic(ctx, t, adm, "idle", 16, 3)
	if md, err := adm.Metadata(ctx); err != nil || md.Cluster != "idle-test" {
		t.Fatalf("Metadata: cluster %q (%v), want the --cluster-id idle-test", md.Cluster, err)
	}
	prod := c.client(kgo.DefaultProduceTopic("idle"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	defer prod.Close()
	for i := range 64 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	prod.Close()
	waitMetric := func(id int, name string, want func(float64) bool, what string) {
		t.Helper()
		var v float64
		var ok bool
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if v, ok = metric(c, id, name); ok && want(v) {
				return
			}
		}
		t.Fatalf("node %d: %s = %v (reported: %v), want %s", id, name, v, ok, what)
	}
	for id := 1; id <= 3; id++ {
		waitMetric(id, "sluice_raft_groups", func(v float64) bool { return v == 17 }, "17 (16 partitions and the metadata group)")
		waitMetric(id, "sluice_raft_groups_awake", func(v float64) bool { return v == 0 }, "0 once idle")
		waitMetric(id, "sluice_raft_peers_down", func(v float64) bool { return v == 0 }, "0")
	}
	c.kill(3)
	for id := 1; id <= 2; id++ {
		waitMetric(id, "sluice_raft_peers_down", func(v float64) bool { return v == 1 }, "1 after node 3 was killed")
	}
}

// metric reads one unlabelled sample from node id's /metrics; false if it is absent or
// the node does not answer.
func metric(c *cluster, id int, name string) (float64, bool) {
	resp, err := http.Get("http://" + c.procs[id-1].Addr("http") + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		var v float64
		if _, err := fmt.Sscanf(line, name+" %g", &v); err == nil {
			return v, true
		}
	}
	return 0, false
}
