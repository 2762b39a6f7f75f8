package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/cluster/engine"
	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/raftstore"
	"github.com/sluice-mq/sluice/internal/cluster/tcptransport"
	"github.com/sluice-mq/sluice/internal/server"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// clusterName is what every node's transport checks in its hello when --cluster-id is
// not given: one cluster's nodes never talk to another's by mistake, and two clusters
// sharing a network need --cluster-id.
const clusterName = "sluice"

// memberMarker, in the data directory, says this node has been a member of a cluster:
// from then on its Raft directory must hold its state (engine.Options.Member), so a node
// whose Raft directory was lost refuses to start instead of voting with nothing.
const memberMarker = "cluster-member"

// clusterNode is the Raft side of a node: its engine, transport and host, and the
// metadata group, all started before the broker opens over them.
type clusterNode struct {
	log  *slog.Logger
	self multiraft.NodeID
	eng  *engine.Engine
	tr   *tcptransport.Transport
	host *multiraft.Host
	meta *meta.Machine
	cat  *meta.Catalog
	addr string // --cluster-addr
	// streams are the calls peers forward over the transport (peerstreams.go).
	streams *peerStreams
	cancel  context.CancelFunc
	ran     chan struct{}
}

// openCluster starts the Raft engine of a node configured with --node-id.
func openCluster(s *server.Server) (_ *clusterNode, err error) {
	cfg := s.Config()
	peers, err := server.ParseClusterPeers(cfg.ClusterPeers)
	if err != nil {
		return nil, fmt.Errorf("--cluster-peers: %w", err)
	}
	self := multiraft.NodeID(cfg.NodeID)
	log := s.Logger().With("node", cfg.NodeID)
	member := true
	if _, err := os.Stat(filepath.Join(cfg.DataDir, memberMarker)); errors.Is(err, fs.ErrNotExist) {
		member = false
	} else if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if err := vfs.MkdirAllDurable(vfs.Default, cfg.DataDir); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	eng, err := engine.Open(engine.Options{Node: self, Member: member,
		// 16 MiB segments: compaction frees a group's Raft log a whole segment at a time,
		// and a partition's is compacted every 8 MiB of records (replpart), so its disk use
		// stays within about two snapshot intervals and a segment.
		Store: raftstore.Options{Dir: filepath.Join(cfg.DataDir, "raft"), SegmentBytes: 16 << 20, DeleteInBackground: true, Logger: log, Observer: s.Metrics()}})
	if errors.Is(err, engine.ErrStateLost) {
		// The remedy, not only the refusal: the operator's next step is not obvious.
		return nil, fmt.Errorf("cluster: %w; under node id %d it would vote having forgotten its votes and what it acknowledged, "+
			"so it comes back as a new node: an empty --data-dir, a new --node-id with --cluster-join, "+
			"\"sluice cluster add-node\" for it and \"sluice cluster remove-node %d\" (docs/cluster.md, \"Replace a node that lost its disk\")",
			err, cfg.NodeID, cfg.NodeID)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	defer func() {
		if err != nil {
			eng.Close()
		}
	}()
	if !member {
		if err := vfs.WriteFileAtomic(vfs.Default, cfg.DataDir, memberMarker, []byte("this node's Raft state is in raft/\n")); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
	}
	others := map[multiraft.NodeID]string{}
	var all, otherIDs []multiraft.NodeID
	for _, p := range peers {
		all = append(all, multiraft.NodeID(p.ID))
		if p.ID != cfg.NodeID {
			others[multiraft.NodeID(p.ID)] = p.Addr
			otherIDs = append(otherIDs, multiraft.NodeID(p.ID))
		}
	}
	id := cfg.ClusterID
	if id == "" {
		id = clusterName
	}
	streams := newPeerStreams()
	tcfg := tcptransport.Config{Node: self, ClusterID: id, Peers: others, Logger: log, Streams: streams.handle}
	reloader, err := clusterTLS(cfg, log, &tcfg)
	if err != nil {
		return nil, err
	}
	tr, err := tcptransport.New(tcfg)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	host, err := multiraft.New(multiraft.Config{Node: self, Peers: otherIDs, Engine: eng, Transport: tr, Log: log,
		SnapshotEntries: uint64(cfg.ClusterSnapshotEntries), ObserveRound: s.Metrics().RaftRounds()})
	if err != nil {
		tr.Close()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.ClusterAddr)
	if err != nil {
		tr.Close()
		return nil, fmt.Errorf("--cluster-addr: %w", err)
	}
	go tr.Serve(ln, host)
	c := &clusterNode{log: log, self: self, eng: eng, tr: tr, addr: cfg.ClusterAddr, host: host, meta: meta.NewMachine(self),
		streams: streams, ran: make(chan struct{})}
	if cfg.ClusterMaxFeatureLevel > 0 {
		c.meta.AdvertiseFeatureLevel(cfg.ClusterMaxFeatureLevel)
	}
	// The metadata group is bootstrapped by every node of the first start with the
	// same voters; afterwards it reopens from the Raft directory.
	// A node joining a running cluster (--cluster-join) starts it empty: the metadata
	// leader adds it as a learner once a member admits it (`sluice cluster add-node`),
	// and sends it a snapshot.
	bootstrap := eng.Fresh() && !cfg.ClusterJoin
	var voters []multiraft.NodeID
	if bootstrap {
		voters = all
	}
	if err := host.CreateGroup(meta.Group, voters, c.meta); err != nil {
		tr.Close()
		host.Close()
		return nil, fmt.Errorf("cluster: metadata group: %w", err)
	}
	c.cat = meta.NewCatalog(host, c.meta)
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	if reloader != nil {
		reloader.Watch(ctx, cfg.TLSReloadInterval) // ends with the host
	}
	go func() {
		defer close(c.ran)
		if err := host.Run(ctx, multiraft.NewTimeTicker(cfg.ClusterTick)); err != nil && !errors.Is(err, context.Canceled) {
			log.Error("cluster: the Raft host stopped; this node no longer replicates and must be restarted", "err", err)
		}
	}()
	if bootstrap && self == all[0] {
		_ = host.Campaign(meta.Group) // the first start elects at once, not after a timeout
	}
	log.Info("cluster: node started", "cluster_addr", ln.Addr().String(), "peers", cfg.ClusterPeers, "fresh", eng.Fresh(),
		"tls", reloader != nil, "joining", eng.Fresh() && cfg.ClusterJoin)
	return c, nil
}

// brokerOptions is the broker's view of the cluster.
func (c *clusterNode) brokerOptions() *broker.ClusterOptions {
	return &broker.ClusterOptions{Host: c.host, Meta: c.meta, Catalog: c.cat, Peers: c.tr, Addr: c.addr, Disk: c.eng}
}

// register keeps this node's client addresses in the catalog: at start, and again
// whenever the catalog has other ones (a restart with new listeners). Once they are there
// it waits for the catalog to change rather than looking every second: one wake-up a
// second less on an idle node.
func (c *clusterNode) register(ctx context.Context, s *server.Server) {
	warned := false
	for {
		changed := c.meta.Changed() // before the State it reads: no change is missed
		if c.meta.State().Removed[c.self] {
			if !warned {
				c.log.Warn("cluster: this node was removed from the cluster (sluice cluster remove-node): stop it; " +
					"its node id is never admitted again")
				warned = true
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		want := meta.Node{ID: c.self, KafkaAddr: s.AdvertisedAddr(server.Kafka),
			HTTPAddr: s.AdvertisedAddr(server.HTTP), SQSAddr: s.AdvertisedAddr(server.SQS)}
		// The TLS listeners are not registered but told to peers that ask (meta/listeners.go).
		c.meta.SetListeners(meta.Listeners{KafkaTLS: s.AdvertisedAddr(server.KafkaTLS),
			HTTPTLS: s.AdvertisedAddr(server.HTTPTLS), SQSTLS: s.AdvertisedAddr(server.SQSTLS)})
		var retry <-chan time.Time
		if !c.registered(want) {
			if want.KafkaAddr != "" || s.Config().KafkaAddr == "" {
				rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				if err := c.cat.RegisterNode(rctx, want); err != nil && ctx.Err() == nil {
					c.log.Debug("cluster: registering this node's addresses; retrying", "err", err)
				}
				cancel()
			}
			// Not there yet (a listener without its address, a refused or lost
			// registration, or one applied since): look again in a second.
			retry = time.After(time.Second)
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-retry:
		}
	}
}

func (c *clusterNode) registered(want meta.Node) bool {
	for _, n := range c.meta.State().Nodes {
		if n.ID == want.ID {
			return n == want
		}
	}
	return false
}

// close stops the host, then the transport and the engine: after the front-ends
// drained, before the broker closes its logs.
func (c *clusterNode) close() error {
	c.cancel()
	<-c.ran
	c.host.Close()
	return errors.Join(c.tr.Close(), c.eng.Close())
}
