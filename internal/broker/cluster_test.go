package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/cluster/engine"
	"github.com/sluice-mq/sluice/internal/cluster/memnet"
	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/raftstore"
	"github.com/sluice-mq/sluice/internal/testlog"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// memCluster is brokers of a cluster in one process: each on its own crashable MemFS,
// their hosts on one live in-memory network, ticking on real timers.
type memCluster struct {
	t     *testing.T
	net   *memnet.Network
	ids   []multiraft.NodeID
	nodes map[multiraft.NodeID]*memNode
	// segmentBytes is the brokers' Options.SegmentBytes (0: the default).
	segmentBytes int64
	// now is the brokers' Options.Now (nil: time.Now); the hosts tick on real timers.
	now func() time.Time
	// advertise is the feature level a node tells the others it reads (missing: its
	// binary's), as --cluster-max-feature-level sets it (cluster_features_test.go).
	advertise map[multiraft.NodeID]int
	// wrapFS, when set, is the file system a node runs on, given its disk (an ErrorFS over
	// it, to fill it: cluster_diskfull_test.go); nil: the disk itself.
	wrapFS func(multiraft.NodeID, *vfs.MemFS) vfs.FS
	// logs, when set, keeps what every node's broker logs (Info and above).
	logs *testlog.Buffer
}

type memNode struct {
	fs     *vfs.MemFS
	eng    *engine.Engine
	host   *multiraft.Host
	b      *Broker
	cancel context.CancelFunc
	ran    chan struct{} // closed when the host's Run returned
	tr     *deadableTransport
}

// deadableTransport is a node's way onto the network until it dies: a crashed host's
// goroutines may still be in a Ready round, and nothing they send may reach a peer (a
// process killed sends nothing after its death; without this a zombie acknowledged entries
// it wrote after the disk's crash image was taken).
type deadableTransport struct {
	multiraft.Transport
	dead atomic.Bool
}

func (d *deadableTransport) Send(b multiraft.Batch) {
	if !d.dead.Load() {
		d.Transport.Send(b)
	}
}

// Request carries a partition replica's pulls (multiraft.Requester), until death too.
func (d *deadableTransport) Request(ctx context.Context, to multiraft.NodeID, g multiraft.GroupID, req []byte) ([]byte, error) {
	if d.dead.Load() {
		return nil, errors.New("dead")
	}
	return d.Transport.(multiraft.Requester).Request(ctx, to, g, req)
}

func newMemCluster(t *testing.T, n int) *memCluster { return newMemClusterSegments(t, n, 0) }

// newMemClusterSegments is newMemCluster with brokers whose logs roll at
// segmentBytes.
func newMemClusterSegments(t *testing.T, n int, segmentBytes int64) *memCluster {
	return newMemClusterClock(t, n, segmentBytes, nil)
}

// newMemClusterClock is newMemClusterSegments with brokers on the clock now (the
// retention tests' fake one).
func newMemClusterClock(t *testing.T, n int, segmentBytes int64, now func() time.Time) *memCluster {
	return startMemCluster(&memCluster{t: t, segmentBytes: segmentBytes, now: now}, n)
}

// startMemCluster starts n nodes configured as c says.
func startMemCluster(c *memCluster, n int) *memCluster {
	startMemClusterUnregistered(c, n)
	c.register()
	return c
}

// startMemClusterUnregistered starts n nodes and registers none of them in the catalog
// (each node's glue would, a moment after its start).
func startMemClusterUnregistered(c *memCluster, n int) *memCluster {
	t := c.t
	c.net, c.nodes = memnet.NewLive(1), map[multiraft.NodeID]*memNode{}
	for i := 1; i <= n; i++ {
		c.ids = append(c.ids, multiraft.NodeID(i))
	}
	for _, id := range c.ids {
		c.nodes[id] = &memNode{fs: vfs.NewMem()}
		c.start(id)
	}
	t.Cleanup(func() {
		for _, id := range c.ids {
			c.stop(id)
		}
	})
	return c
}

// start opens node id on its disk as `sluice serve` does (internal/node/cluster.go).
func (c *memCluster) start(id multiraft.NodeID) {
	nd := c.nodes[id]
	fsys := vfs.FS(nd.fs)
	if c.wrapFS != nil {
		fsys = c.wrapFS(id, nd.fs)
	}
	eng, err := engine.Open(engine.Options{Node: id, Store: raftstore.Options{FS: fsys, Dir: "/raft", Logger: quietLogger()}})
	if err != nil {
		c.t.Fatalf("n%d: engine: %v", id, err)
	}
	var peers []multiraft.NodeID
	for _, p := range c.ids {
		if p != id {
			peers = append(peers, p)
		}
	}
	nd.tr = &deadableTransport{Transport: c.net.Transport(id)}
	h, err := multiraft.New(multiraft.Config{Node: id, Peers: peers, Engine: eng, Transport: nd.tr,
		SnapshotEntries: 25, Log: clusterTestLogger(id)}) // checkpoints often: restarts restore them and re-apply the rest
	if err != nil {
		c.t.Fatal(err)
	}
	m := meta.NewMachine(id)
	if l, ok := c.advertise[id]; ok {
		m.AdvertiseFeatureLevel(l)
	}
	var voters []multiraft.NodeID
	if eng.Fresh() {
		voters = c.ids
	}
	if err := h.CreateGroup(meta.Group, voters, m); err != nil {
		c.t.Fatal(err)
	}
	c.net.Attach(id, h)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		_ = h.Run(ctx, multiraft.NewTimeTicker(5*time.Millisecond))
	}()
	// HeadroomBytes: the default 64 MiB headroom file, written as zeros into a MemFS, cost
	// every start (and every crash clone) seconds under -race; 64 KiB tests the same thing.
	logger := clusterTestLogger(id)
	if c.logs != nil {
		logger = loggerTo(c.logs).With("node", uint64(id))
	}
	b, err := Open(Options{Dir: "/data", FS: fsys, Logger: logger, SnapshotEvery: 50, SegmentBytes: c.segmentBytes, Now: c.now,
		HeadroomBytes: testHeadroom,
		Cluster: &ClusterOptions{Host: h, Meta: m, Catalog: meta.NewCatalog(h, m), Disk: eng,
			CollectEvery: 20 * time.Millisecond}}) // every cluster test runs with the groups' garbage collection at work
	if err != nil {
		c.t.Fatalf("n%d: broker: %v", id, err)
	}
	nd.host, nd.b, nd.cancel, nd.ran, nd.eng = h, b, cancel, ran, eng
}

// register puts every node in the catalog (placement counts registered nodes only), as
// each node's glue does at start.
func (c *memCluster) register() {
	errs := make(chan error, len(c.ids))
	for _, id := range c.ids {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			errs <- c.nodes[id].b.cluster.cat.RegisterNode(ctx, meta.Node{ID: id, KafkaAddr: fmt.Sprintf("n%d:9092", id)})
		}()
	}
	for range c.ids {
		if err := <-errs; err != nil {
			c.t.Fatalf("register: %v", err)
		}
	}
	// Each registration returned once its own node saw it; a topic created through a node
	// that has not applied the others' yet would be refused (too few nodes registered).
	deadline := time.Now().Add(20 * time.Second)
	for _, id := range c.ids {
		for len(c.nodes[id].b.ClusterNodes()) < len(c.ids) {
			if time.Now().After(deadline) {
				c.t.Fatalf("n%d sees %d registered nodes, want %d", id, len(c.nodes[id].b.ClusterNodes()), len(c.ids))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// stop shuts node id down cleanly, in internal/node's order: the host's Run has returned
// before the broker closes its logs (no Apply under way while they close).
func (c *memCluster) stop(id multiraft.NodeID) {
	nd := c.nodes[id]
	if nd.host == nil {
		return
	}
	c.net.Detach(id)
	nd.cancel()
	<-nd.ran
	nd.host.Close()
	nd.b.Close()
	nd.host, nd.b = nil, nil
}

// crash stops node id at once; its broker is abandoned, never closed (a close would
// sync). A power cut keeps only what its disk had synced; a kill (the process dies, the
// machine does not) keeps every write, synced or not.
func (c *memCluster) crash(id multiraft.NodeID, powerCut bool) {
	nd := c.nodes[id]
	nd.tr.dead.Store(true)
	c.net.Detach(id)
	if !powerCut {
		nd.fs.SyncAll() // the page cache outlives the process
	}
	nd.fs = nd.fs.CrashClone() // the disk as of the crash; what the zombie writes later is lost
	nd.cancel()
	nd.host.Close()
	nd.b.cluster.close()
	nd.host, nd.b = nil, nil
}

// describe is every live node's view of every group it hosts.
func (c *memCluster) describe() string {
	var out string
	for _, id := range c.ids {
		nd := c.nodes[id]
		if nd.host == nil {
			out += fmt.Sprintf("\nn%d down", id)
			continue
		}
		for _, g := range nd.host.Groups() {
			st, err := nd.host.Status(g)
			out += fmt.Sprintf("\nn%d g%d: %+v %v", id, g, st, err)
		}
		out += fmt.Sprintf("\nn%d stats %+v", id, nd.host.Stats())
	}
	return out
}

// leaderOf is the broker leading topic/partition, as its own node sees it.
func (c *memCluster) leaderOf(topic string, p int32) *Broker {
	for _, id := range c.ids {
		nd := c.nodes[id]
		if nd.b == nil {
			continue
		}
		if pl, err := nd.b.PartitionPlacement(topic, p); err == nil && pl.Leader == int32(id) {
			return nd.b
		}
	}
	return nil
}

// TestClusterPowerCuts: three brokers of a cluster in one process, a topic of two
// partitions replicated on all three, records produced through whoever leads while nodes
// are killed (their local logs keep records past the last checkpoint, which a restart
// applies again: the log must be cut back first) or lose power (their unsynced writes
// gone: the local partition logs are never fsynced outside checkpoints) and come back. Afterwards every acknowledged record is in its
// partition at the offset it was acknowledged at, on every replica.
func TestClusterPowerCuts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	c := newMemCluster(t, 3)
	if _, err := c.nodes[2].b.CreateTopic(TopicSettings{Name: "t", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(7))
	acked := map[int32]map[int64]string{0: {}, 1: {}}
	next, unknown := 0, 0
	produce := func(n int) {
		for range n {
			p := int32(next % 2)
			v := strconv.Itoa(next)
			next++
			for attempt := 0; ; attempt++ {
				if attempt == 400 {
					t.Fatalf("no leader for t/%d for 4 s", p)
				}
				b := c.leaderOf("t", p)
				if b == nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				res, err := b.Produce(ctx, "t", []ProduceRecord{{Value: []byte(v), Partition: &p}}, ProduceOptions{})
				cancel()
				if errors.Is(err, ErrNotLeader) || errors.Is(err, ErrClosed) {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				if errors.Is(err, ErrReplicationUnknown) {
					unknown++
					if unknown == 10 {
						t.Fatalf("t/%d: 10 produces in a row of unknown outcome; the groups: %s", p, c.describe())
					}
					break // maybe stored: not acknowledged
				}
				unknown = 0
				if err != nil {
					t.Fatalf("produce %s: %v", v, err)
				}
				acked[p][res[0].Offset] = v
				break
			}
		}
	}
	rounds := envInt("SLUICE_CLUSTER_CUTS", 6)
	for round := range rounds {
		produce(60)
		victim := c.ids[rng.Intn(len(c.ids))]
		powerCut := round%2 == 0
		c.crash(victim, powerCut)
		produce(40)
		c.start(victim)
		t.Logf("round %d: n%d crashed (power cut: %v)", round, victim, powerCut)
	}
	produce(20)
	// Every replica converges on the same records, every acknowledged one at its offset.
	deadline := time.Now().Add(20 * time.Second)
	for _, id := range c.ids {
		for p := range int32(2) {
			for {
				got, err := localRecords(c.nodes[id].b, "t", p)
				if err == nil && covers(got, acked[p]) == "" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("n%d t/%d: %v %s", id, p, err, covers(got, acked[p]))
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
}

// localRecords reads a replica's local log of topic/p: offset -> value.
func localRecords(b *Broker, topic string, p int32) (map[int64]string, error) {
	_, part, err := b.streams.partition(topic, p)
	if err != nil {
		return nil, err
	}
	out := map[int64]string{}
	for off := part.log.LogStartOffset(); off < part.log.HighWatermark(); {
		rd, err := part.log.Read(off, 1<<20)
		if err != nil {
			return nil, err
		}
		if len(rd) == 0 {
			break
		}
		for len(rd) > 0 {
			h, err := batch.ParseHeader(rd)
			if err != nil {
				return nil, err
			}
			size := int(h.Size())
			i := int64(0)
			for r, err := range batch.Records(rd[:size]) {
				if err != nil {
					return nil, err
				}
				out[h.BaseOffset+i] = string(r.Value)
				i++
			}
			off = h.BaseOffset + int64(h.LastOffsetDelta) + 1
			rd = rd[size:]
		}
	}
	return out, nil
}

// covers says what of want is missing or different in got ("" when nothing).
func covers(got map[int64]string, want map[int64]string) string {
	for off, v := range want {
		if got[off] != v {
			return fmt.Sprintf("offset %d holds %q, acknowledged %q (%d records here, %d acknowledged)", off, got[off], v, len(got), len(want))
		}
	}
	return ""
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// clusterTestLogger is silent unless SLUICE_TEST_LOG is set (then warnings and errors go to
// stderr, each line naming its node).
func clusterTestLogger(id multiraft.NodeID) *slog.Logger {
	if os.Getenv("SLUICE_TEST_LOG") == "" {
		return quietLogger()
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("node", uint64(id))
}
