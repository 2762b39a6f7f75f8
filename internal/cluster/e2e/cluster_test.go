package e2e

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/cluster/faultproxy"
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
	sqs   []string // --sqs-addr of node i+1
	procs []*testproc.Proc
	peers string
	flags []string // more flags for every node
	// nodeFlags, when set, gives node id more flags of its own (its certificate, say).
	nodeFlags func(id int) []string
	// nodeBins, when set, is node i+1's binary where not "" (a rolling upgrade), else bin.
	nodeBins []string
	// nodePeers, when set, is node i+1's own --cluster-peers (peers behind proxies).
	nodePeers []string
	// nodeDirs, when set, is node i+1's data directory where not "" (one on a file
	// system of its own), else one in the test's temporary directory.
	nodeDirs []string
	// links[from-1][to-1] is the proxy node from dials to reach node to (nil on the
	// diagonal), when the cluster runs behind proxies.
	links [][]*faultproxy.Proxy
	// direct holds one client per node whose requests go to that node only (nodeClient),
	// under directMu.
	directMu sync.Mutex
	direct   map[int]*kgo.Client
	// history is every process the nodes ran as, in order (start).
	history []nodeRun
}

// freeAddr is an address for a node's listener that stays its own across kills and
// restarts (testproc.StableAddr: below the ephemeral range, so no outgoing connection
// takes it while the node is down).
func freeAddr(t *testing.T) string { return testproc.StableAddr(t) }

// startCluster starts n nodes, each with the flags given too.
func startCluster(t *testing.T, n int, flags ...string) *cluster {
	return startClusterWith(t, n, false, flags...)
}

// startProxiedCluster is startCluster with a faultproxy on every directed link: node i's
// --cluster-peers names, for every other node j, the proxy links[i][j] in front of j's
// listener, so cutting a link is a mode on one proxy (docs/cluster.md, "The fault proxy").
func startProxiedCluster(t *testing.T, n int) *cluster {
	return startClusterWith(t, n, true)
}

func startClusterWith(t *testing.T, n int, proxied bool, flags ...string) *cluster {
	return startClusterEach(t, n, proxied, nil, flags...)
}

// startClusterEach is startClusterWith with flags of each node's own.
func startClusterEach(t *testing.T, n int, proxied bool, nodeFlags func(id int) []string, flags ...string) *cluster {
	return startClusterOf(&cluster{t: t, bin: testproc.Build(t, t.TempDir()), flags: flags, nodeFlags: nodeFlags}, n, proxied)
}

// startClusterOf starts n nodes of c as its fields say (t, bin, flags, nodeFlags, nodeBins).
func startClusterOf(c *cluster, n int, proxied bool) *cluster {
	t := c.t
	var peers []string
	for i := range n {
		dir := filepath.Join(t.TempDir(), fmt.Sprintf("n%d", i+1))
		if i < len(c.nodeDirs) && c.nodeDirs[i] != "" {
			dir = c.nodeDirs[i]
		}
		c.dirs = append(c.dirs, dir)
		c.raft = append(c.raft, freeAddr(t))
		c.kafka = append(c.kafka, freeAddr(t))
		c.sqs = append(c.sqs, freeAddr(t))
		peers = append(peers, fmt.Sprintf("%d=%s", i+1, c.raft[i]))
	}
	c.peers = strings.Join(peers, ",")
	if proxied {
		c.links = make([][]*faultproxy.Proxy, n)
		for from := range n {
			c.links[from] = make([]*faultproxy.Proxy, n)
			var own []string
			for to := range n {
				addr := c.raft[to]
				if to != from {
					p, err := faultproxy.New(c.raft[to])
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = p.Close() })
					c.links[from][to], addr = p, p.Addr()
				}
				own = append(own, fmt.Sprintf("%d=%s", to+1, addr))
			}
			c.nodePeers = append(c.nodePeers, strings.Join(own, ","))
		}
	}
	c.procs = make([]*testproc.Proc, n)
	// A failed test shows what each node warned of, the live process's and every one killed
	// before it: a kill test that fails under CI's load says little without them.
	// SLUICE_CLUSTER_WARNINGS=N shows the last N (all: -1) after a passing test too (a
	// long-form run looking for stalls: "a Ready round held every group", peers counted
	// down, or warnings nobody should see).
	t.Cleanup(func() {
		last := 30
		if v, err := strconv.Atoi(os.Getenv("SLUICE_CLUSTER_WARNINGS")); err == nil {
			last = v
		} else if !t.Failed() {
			return
		}
		which := fmt.Sprintf("the last %d", last)
		if last < 0 {
			last, which = math.MaxInt, "all"
		}
		for _, p := range c.history {
			t.Logf("%s: its warnings and errors (%s):\n%s", p.name, which, p.proc.Problems(last))
		}
	})
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
	peers := c.peers
	if c.nodePeers != nil {
		peers = c.nodePeers[i]
	}
	args := []string{"--data-dir", c.dirs[i], "--node-id", strconv.Itoa(id),
		"--cluster-addr", c.raft[i], "--cluster-peers", peers,
		"--kafka-addr", c.kafka[i], "--http-addr", "127.0.0.1:0", "--sqs-addr", c.sqs[i]}
	args = append(args, c.flags...)
	if c.nodeFlags != nil {
		args = append(args, c.nodeFlags(id)...)
	}
	bin := c.bin
	if i < len(c.nodeBins) && c.nodeBins[i] != "" {
		bin = c.nodeBins[i]
	}
	c.procs[i] = testproc.Serve(c.t, bin, args...)
	c.history = append(c.history, nodeRun{fmt.Sprintf("node %d, run %d", id, c.runs(id)+1), id, c.procs[i]})
}

// nodeRun is one process a node ran as.
type nodeRun struct {
	name string
	id   int
	proc *testproc.Proc
}

// runs counts the processes node id ran as so far.
func (c *cluster) runs(id int) int {
	n := 0
	for _, r := range c.history {
		if r.id == id {
			n++
		}
	}
	return n
}

func (c *cluster) kill(id int) { c.procs[id-1].Kill() }

// isolate puts every link between node id and the others in mode m (both directions);
// faultproxy.Pass heals them.
func (c *cluster) isolate(id int, m faultproxy.Mode) {
	for other := range c.links {
		if other != id-1 {
			c.links[id-1][other].Set(m)
			c.links[other][id-1].Set(m)
		}
	}
}

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
