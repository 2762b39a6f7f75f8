package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testproc"
)

// cluster is n `sluice serve` processes on fixed loopback ports, so a node restarted
// comes back where clients and peers expect it.
type cluster struct {
	t     *testing.T
	bin   string
	dirs  []string
	raft  []string // --cluster-addr of node i+1
	kafka []string // --kafka-addr of node i+1
	procs []*testproc.Proc
	peers string
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func startCluster(t *testing.T, n int) *cluster {
	c := &cluster{t: t, bin: testproc.Build(t, t.TempDir())}
	var peers []string
	for i := range n {
		c.dirs = append(c.dirs, filepath.Join(t.TempDir(), fmt.Sprintf("n%d", i+1)))
		c.raft = append(c.raft, freeAddr(t))
		c.kafka = append(c.kafka, freeAddr(t))
		peers = append(peers, fmt.Sprintf("%d=%s", i+1, c.raft[i]))
	}
	c.peers = strings.Join(peers, ",")
	c.procs = make([]*testproc.Proc, n)
	for i := range n {
		c.start(i + 1)
	}
	for i := range n {
		c.procs[i].Addr("kafka")
	}
	return c
}

// start runs node id (1-based) on its data directory and ports.
func (c *cluster) start(id int) {
	i := id - 1
	c.procs[i] = testproc.Serve(c.t, c.bin, "--data-dir", c.dirs[i], "--node-id", strconv.Itoa(id),
		"--cluster-addr", c.raft[i], "--cluster-peers", c.peers,
		"--kafka-addr", c.kafka[i], "--http-addr", "127.0.0.1:0", "--sqs-addr", "")
}

func (c *cluster) kill(id int) { c.procs[id-1].Kill() }

func (c *cluster) client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	base := []kgo.Opt{kgo.SeedBrokers(c.kafka...), kgo.RetryTimeout(60 * time.Second),
		kgo.RecordRetries(1 << 20), kgo.MetadataMinAge(100 * time.Millisecond)}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// leaderOf asks the cluster who leads topic/partition (0: nobody yet).
func (c *cluster) leaderOf(ctx context.Context, adm *kadm.Client, topic string, p int32) int {
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return 0
	}
	td, ok := md.Topics[topic]
	if !ok {
		return 0
	}
	pd, ok := td.Partitions[p]
	if !ok || pd.Leader < 0 || pd.Err != nil {
		return 0
	}
	return int(pd.Leader)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
