package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/testproc"
	"github.com/sluice-mq/sluice/internal/tlsconf/tlstest"
)

// TestClusterMutualTLS: three nodes whose Raft transport is mutual TLS
// (--cluster-tls-cert/-key/-ca, certificates made by openssl in the test, CN node-<id>)
// replicate a topic. Node 3 restarted with a certificate of another CA (CN node-3 all
// the same) is refused by its peers and gets nothing of what is produced meanwhile; back
// with its own certificate, it catches up. Each node also serves Kafka over TLS to
// clients, and a TLS client is told every node's TLS listener (checkKafkaOverTLS).
func TestClusterMutualTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three sluice processes")
	}
	dir := t.TempDir()
	ca, pairs := clusterCA(t, dir, 3)
	other, err := tlstest.NewCA(filepath.Join(dir), "other")
	if err != nil {
		t.Fatal(err)
	}
	rogue, err := other.Issue("rogue3", "node-3", 9)
	if err != nil {
		t.Fatal(err)
	}
	useRogue := false
	c := startClusterEach(t, 3, false, func(id int) []string {
		p, caFile := pairs[id], ca.Cert
		if id == 3 && useRogue {
			p, caFile = rogue, other.Cert
		}
		return []string{"--cluster-tls-cert", p.Cert, "--cluster-tls-key", p.Key, "--cluster-tls-ca", caFile,
			// and a Kafka TLS listener for clients, with the same certificate (checkKafkaOverTLS)
			"--tls-cert", p.Cert, "--tls-key", p.Key, "--kafka-tls-addr", "127.0.0.1:0"}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for i, p := range c.procs {
		if !strings.Contains(p.Logs(), `"fresh":true,"tls":true`) {
			t.Fatalf("node %d did not start its transport with TLS:\n%s", i+1, p.Logs())
		}
	}
	kc := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("secure"))
	adm := kadm.NewClient(kc)
	createTopic(ctx, t, adm, "secure", 1, 3)
	produce := func(n int) {
		t.Helper()
		for i := range n {
			if err := kc.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
	}
	produce(20)
	waitCaughtUp(ctx, t, c, "secure")
	checkKafkaOverTLS(ctx, t, c, ca.Cert)

	// Node 3 again, with a certificate of another CA.
	c.kill(3)
	useRogue = true
	c.start(3)
	c.procs[2].Addr("http")
	produce(10)
	time.Sleep(3 * time.Second) // many Raft heartbeats: node 3 would have the records by now
	// At most 20: a restarted replica knows its log committed only as far as its
	// durable HardState says, and that commit index is written lazily
	// (internal/cluster/raftstore): until the leader tells it more, it may show
	// fewer than the 20 it held. More than 20 would mean it got records.
	if hw := c.highWatermark(ctx, 3, "secure"); hw < 0 || hw > 20 {
		t.Errorf("node 3 with another CA's certificate has high watermark %d, want at most 20 (refused, it gets nothing)", hw)
	}
	for _, id := range []int{1, 2} {
		if hw := c.highWatermark(ctx, id, "secure"); hw != 30 {
			t.Errorf("node %d: high watermark %d, want 30", id, hw)
		}
	}
	refused := false
	for _, id := range []int{1, 2} {
		refused = refused || strings.Contains(c.procs[id-1].Logs(), "TLS handshake failed")
	}
	if !refused {
		t.Errorf("neither node 1 nor 2 logged refusing node 3's handshake")
	}
	if !strings.Contains(c.procs[2].Logs(), "certificate") {
		t.Errorf("node 3 logged nothing of its peers' certificates being refused:\n%s", c.procs[2].Logs())
	}

	// Back with its own certificate: it catches up.
	c.kill(3)
	useRogue = false
	c.start(3)
	c.procs[2].Addr("http")
	waitCaughtUp(ctx, t, c, "secure")
	if hw := c.highWatermark(ctx, 3, "secure"); hw != 30 {
		t.Errorf("node 3 back with its certificate: high watermark %d, want 30", hw)
	}
}

// clusterCA makes, with openssl in dir, a CA and a certificate for each of nodes 1..n
// (CN node-<id>, usable by a server for 127.0.0.1 and by a client), or skips the test
// where openssl is missing (fails it in CI).
func clusterCA(t *testing.T, dir string, n int) (*tlstest.CA, map[int]tlstest.Pair) {
	t.Helper()
	if err := tlstest.Available(); err != nil {
		testproc.Missing(t, "openssl is not installed: the test makes its certificates with it")
	}
	ca, err := tlstest.NewCA(dir, "cluster")
	if err != nil {
		t.Fatal(err)
	}
	pairs := map[int]tlstest.Pair{}
	for id := 1; id <= n; id++ {
		if pairs[id], err = ca.Issue(fmt.Sprintf("n%d", id), fmt.Sprintf("node-%d", id), int64(id)); err != nil {
			t.Fatal(err)
		}
	}
	return ca, pairs
}

// highWatermark is node id's own view of topic/0 (-1: no answer).
func (c *cluster) highWatermark(ctx context.Context, id int, topic string) int64 {
	info, err := client.New("http://"+c.procs[id-1].Addr("http")).DescribeTopic(ctx, topic)
	if err != nil || len(info.GetPartitions()) != 1 {
		return -1
	}
	return info.GetPartitions()[0].GetHighWatermark()
}
