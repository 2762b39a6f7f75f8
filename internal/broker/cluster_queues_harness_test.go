package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/tcptransport"
	"github.com/sluice-mq/sluice/internal/testproc"
	"go.etcd.io/raft/v3"
)

// qnode is one in-process node of a test cluster: an in-memory Raft engine that survives
// a kill (what it synced), a TCP transport on a fixed loopback port, and a broker.
type qnode struct {
	id     multiraft.NodeID
	addr   string
	eng    *multiraft.MemEngine
	tr     *tcptransport.Transport
	host   *multiraft.Host
	meta   *meta.Machine
	cat    *meta.Catalog
	b      *Broker
	cancel context.CancelFunc
	ran    chan struct{}
	up     bool
	join   bool // started empty to be added to a running cluster (cluster_members_test.go)
}

type qcluster struct {
	t     *testing.T
	ids   []multiraft.NodeID
	nodes map[multiraft.NodeID]*qnode
}

func newQCluster(t *testing.T, n int) *qcluster {
	c := &qcluster{t: t, nodes: map[multiraft.NodeID]*qnode{}}
	for i := 1; i <= n; i++ {
		id := multiraft.NodeID(i)
		addr := freeLoopback(t)
		c.ids = append(c.ids, id)
		c.nodes[id] = &qnode{id: id, addr: addr, eng: multiraft.NewMemEngine()}
	}
	for _, id := range c.ids {
		c.start(id, true)
	}
	t.Cleanup(func() {
		for _, id := range c.ids {
			if c.nodes[id].up {
				c.stop(id)
			}
		}
	})
	for _, id := range c.ids {
		nd := c.nodes[id]
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := nd.cat.RegisterNode(ctx, meta.Node{ID: id, SQSAddr: fmt.Sprintf("sqs-%d", id)})
		cancel()
		if err != nil {
			t.Fatalf("n%d: register: %v", id, err)
		}
	}
	return c
}

// freeLoopback is a loopback address for a node the test stops and starts again on it:
// testproc's, below Linux's ephemeral range and reserved across the test binaries running at
// once (a port drawn here alone was taken, while its node was down, by another package's
// test).
func freeLoopback(t *testing.T) string { return testproc.StableAddr(t) }

func (c *qcluster) start(id multiraft.NodeID, fresh bool) {
	nd := c.nodes[id]
	peers := map[multiraft.NodeID]string{}
	var others []multiraft.NodeID
	for _, o := range c.ids {
		if o != id {
			peers[o], others = c.nodes[o].addr, append(others, o)
		}
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	tr, err := tcptransport.New(tcptransport.Config{Node: id, ClusterID: "test", Peers: peers, Logger: quiet})
	if err != nil {
		c.t.Fatal(err)
	}
	host, err := multiraft.New(multiraft.Config{Node: id, Peers: others, Engine: nd.eng, Transport: tr,
		SnapshotEntries: 50, Logger: nil})
	if err != nil {
		c.t.Fatal(err)
	}
	var ln net.Listener
	for try := 0; ; try++ { // the port of a node just stopped may take a moment to free
		if ln, err = net.Listen("tcp", nd.addr); err == nil || try == 50 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		c.t.Fatal(err)
	}
	go tr.Serve(ln, host)
	nd.meta = meta.NewMachine(id)
	var voters []multiraft.NodeID
	if fresh && !nd.join {
		voters = c.ids
	}
	if err := host.CreateGroup(meta.Group, voters, nd.meta); err != nil {
		c.t.Fatal(err)
	}
	nd.cat = meta.NewCatalog(host, nd.meta)
	ctx, cancel := context.WithCancel(context.Background())
	nd.tr, nd.host, nd.cancel, nd.ran = tr, host, cancel, make(chan struct{})
	go func() {
		defer close(nd.ran)
		_ = host.Run(ctx, multiraft.NewTimeTicker(10*time.Millisecond))
	}()
	if fresh && !nd.join && id == c.ids[0] {
		_ = host.Campaign(meta.Group)
	}
	b, err := Open(Options{Dir: filepath.Join(c.t.TempDir(), fmt.Sprint("n", id)), Logger: quiet, HeadroomBytes: -1,
		Cluster: &ClusterOptions{Host: host, Meta: nd.meta, Catalog: nd.cat, Peers: tr}})
	if err != nil {
		c.t.Fatal(err)
	}
	nd.b, nd.up = b, true
}

// stop crashes node id: its host and broker stop, its engine keeps what it synced.
func (c *qcluster) stop(id multiraft.NodeID) {
	nd := c.nodes[id]
	nd.cancel()
	<-nd.ran
	nd.host.Close()
	nd.tr.Close()
	nd.b.Close()
	if err := nd.eng.Crash(); err != nil {
		c.t.Fatal(err)
	}
	nd.up = false
}

// eventually retries f every 20 ms for up to 20 s.
func (c *qcluster) eventually(what string, f func() error) {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// metaLeader is the up node leading the metadata group.
func (c *qcluster) metaLeader() *qnode {
	c.t.Helper()
	var l *qnode
	c.eventually("a metadata leader", func() error {
		for _, id := range c.ids {
			nd := c.nodes[id]
			if !nd.up {
				continue
			}
			if st, err := nd.host.Status(meta.Group); err == nil && st.Role == raft.StateLeader {
				l = nd
				return nil
			}
		}
		return errors.New("none")
	})
	return l
}

// queueLeader is the up node whose broker serves queue name (it leads the queue's group).
func (c *qcluster) queueLeader(name string) *qnode {
	c.t.Helper()
	var l *qnode
	c.eventually("a leader of queue "+name, func() error {
		for _, id := range c.ids {
			nd := c.nodes[id]
			if !nd.up || !nd.b.cluster.clusteredQueue(name) {
				continue
			}
			if _, _, err := nd.b.cluster.leaderQueue(name); err == nil {
				l = nd
				return nil
			}
		}
		return errors.New("none")
	})
	return l
}
