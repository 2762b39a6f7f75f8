package broker

// Leaders of the groups this node does not host (docs/cluster.md, "What a client sees").
// On a cluster with more nodes than a topic or queue has replicas, some nodes hold no
// replica of a partition or queue, and Raft tells only a group's members who leads it.
// Such a node still answers for them: Kafka Metadata names each partition's leader, a
// produce or fetch sent to it is refused NOT_LEADER_OR_FOLLOWER with the leader, an SQS
// or native request is forwarded to the queue's leader. Before, it named the catalog's
// preferred replica (the first) as leader with every replica in sync, so a client sent
// there during a failover, or after a transfer, went round in circles; a forwarded SQS
// request failed for as long as the preferred replica was down.
//
// So every node asks each live peer, once a reconcile round (a second), which groups it
// leads (meta.Catalog.NodeLeaders: the metadata group's request channel, which every
// node is a member of), and keeps the answer with the highest term for each group. It
// asks only while the catalog has a partition or queue it does not host: on a cluster
// whose every node holds every replica (three nodes, replication factor 3) nothing is
// asked. What it knows is at most a round old; a leader that died since is named until
// the next round, and the client's retry finds the new one.

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"go.etcd.io/raft/v3"
)

// askLeadersTimeout bounds one "which groups do you lead" question to a peer.
const askLeadersTimeout = 300 * time.Millisecond

// remoteLeader is a group's leader as the node leading it said, a round ago at most.
type remoteLeader struct {
	Leader multiraft.NodeID
	Term   uint64
	InSync []multiraft.NodeID // the leader's in-sync replicas (Kafka's ISR)
	// HighWatermark and LogStart, of a partition's group: its offsets on its leader (0
	// for a queue or the metadata group), for DescribeTopic and lag on a node that holds
	// no copy of the partition.
	HighWatermark, LogStart int64
}

// remoteLeaders is what the last round learned.
type remoteLeaders struct {
	mu      sync.Mutex
	byGroup map[multiraft.GroupID]remoteLeader
	// catalog is the catalog state (immutable, replaced on every change) partial was
	// computed for: whether it has a partition or queue this node hosts no replica of.
	// The run loop's only: an idle node does not walk every partition each second.
	catalog *meta.State
	partial bool
}

// remoteLeaderOf returns what this node knows of group g's leader from its peers.
func (c *clusterRT) remoteLeaderOf(g multiraft.GroupID) (remoteLeader, bool) {
	c.remote.mu.Lock()
	defer c.remote.mu.Unlock()
	rl, ok := c.remote.byGroup[g]
	return rl, ok && rl.Leader != 0
}

// unhostedLeader is what this node knows of the leader of partition index of topic, which
// it hosts no replica of.
func (c *clusterRT) unhostedLeader(topic string, index int32) (remoteLeader, bool) {
	ct := c.meta.State().Topics[topic]
	if ct == nil || index < 0 || int(index) >= len(ct.Partitions) {
		return remoteLeader{}, false
	}
	return c.remoteLeaderOf(ct.Partitions[index].Group)
}

// offsetsOf is partition p's offsets as this node best knows them: its own copy's, or,
// on a node that holds none, those its leader told (cluster_leaders.go; at most a round
// old; zero when not known yet).
func (b *Broker) offsetsOf(p *partitionRT) PartitionState {
	if b.cluster == nil || p.repl.Load() != nil {
		return partitionState(p)
	}
	rl, ok := b.cluster.unhostedLeader(p.topic, p.index)
	if !ok {
		return partitionState(p)
	}
	return PartitionState{HighWatermark: rl.HighWatermark, LastStableOffset: rl.HighWatermark, LogStartOffset: rl.LogStart}
}

// refreshRemoteLeaders asks every live peer which groups it leads, when the catalog has a
// partition or queue this node hosts no replica of (the reconcile loop's step).
func (c *clusterRT) refreshRemoteLeaders() {
	if !c.hostsLessThanCatalog() {
		c.remote.mu.Lock()
		c.remote.byGroup = nil
		c.remote.mu.Unlock()
		return
	}
	var (
		mu     sync.Mutex
		merged = map[multiraft.GroupID]remoteLeader{}
		wg     sync.WaitGroup
	)
	for _, nd := range c.meta.State().Nodes {
		n := nd.ID
		if n == c.node || !c.host.PeerAlive(n) {
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(c.bgCtx, askLeadersTimeout)
			defer cancel()
			b, err := c.cat.NodeLeaders(ctx, n)
			if err != nil {
				c.log.Debug("cluster: no answer to which groups a peer leads", "peer", uint64(n), "err", err)
				return
			}
			led, err := decodeLeaders(b, n)
			if err != nil {
				c.log.Warn("cluster: a peer's list of the groups it leads does not decode", "peer", uint64(n), "err", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for g, rl := range led {
				if old, ok := merged[g]; !ok || rl.Term > old.Term {
					merged[g] = rl
				}
			}
		})
	}
	wg.Wait()
	c.remote.mu.Lock()
	c.remote.byGroup = merged
	c.remote.mu.Unlock()
}

// hostsLessThanCatalog reports whether the catalog has a partition or queue whose
// replicas do not include this node.
func (c *clusterRT) hostsLessThanCatalog() bool {
	st := c.meta.State()
	if st == c.remote.catalog {
		return c.remote.partial
	}
	c.remote.catalog, c.remote.partial = st, hostsLess(st, c.node)
	return c.remote.partial
}

func hostsLess(st *meta.State, node multiraft.NodeID) bool {
	for _, t := range st.Topics {
		for _, p := range t.Partitions {
			if !slices.Contains(p.Replicas, node) {
				return true
			}
		}
	}
	for _, q := range st.Queues {
		if !slices.Contains(q.Replicas, node) {
			return true
		}
	}
	return false
}

// leaderClaim is one group a node leads, as it tells its peers.
type leaderClaim struct {
	group     multiraft.GroupID
	term      uint64
	inSync    []multiraft.NodeID
	hw, start int64 // a partition's offsets; 0 for other groups
}

// encodeLeaders is this node's answer to "which groups do you lead".
func (c *clusterRT) encodeLeaders() []byte {
	offsets := map[multiraft.GroupID]PartitionState{}
	for _, t := range c.b.streams.topicList() {
		_, parts := t.snapshot()
		for _, p := range parts {
			if h := p.repl.Load(); h != nil {
				offsets[h.group] = partitionState(p)
			}
		}
	}
	var claims []leaderClaim
	for _, g := range c.host.Groups() {
		if st, err := c.host.Status(g); err == nil && st.Role == raft.StateLeader && !st.Removed {
			o := offsets[g]
			claims = append(claims, leaderClaim{group: g, term: st.Term, inSync: st.InSync, hw: o.HighWatermark, start: o.LogStartOffset})
		}
	}
	return encodeLeadersOf(claims)
}

// encodeLeadersOf encodes claims as uvarints: their count, then for each the group, the
// term, the number of in-sync replicas and their node ids, the high watermark and the log
// start.
func encodeLeadersOf(claims []leaderClaim) []byte {
	b := binary.AppendUvarint(nil, uint64(len(claims)))
	for _, cl := range claims {
		b = binary.AppendUvarint(b, uint64(cl.group))
		b = binary.AppendUvarint(b, cl.term)
		b = binary.AppendUvarint(b, uint64(len(cl.inSync)))
		for _, n := range cl.inSync {
			b = binary.AppendUvarint(b, uint64(n))
		}
		b = binary.AppendUvarint(b, uint64(max(cl.hw, 0)))
		b = binary.AppendUvarint(b, uint64(max(cl.start, 0)))
	}
	return b
}

var errLeadersEncoding = errors.New("malformed list of groups led")

// decodeLeaders reads encodeLeaders' answer from node from.
func decodeLeaders(b []byte, from multiraft.NodeID) (map[multiraft.GroupID]remoteLeader, error) {
	next := func() (uint64, error) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, errLeadersEncoding
		}
		b = b[n:]
		return v, nil
	}
	count, err := next()
	if err != nil || count > uint64(len(b)) { // every group takes five bytes at least
		return nil, errLeadersEncoding
	}
	out := make(map[multiraft.GroupID]remoteLeader, count)
	for range count {
		g, err := next()
		if err != nil {
			return nil, err
		}
		term, err := next()
		if err != nil {
			return nil, err
		}
		n, err := next()
		if err != nil || n > uint64(len(b)) {
			return nil, errLeadersEncoding
		}
		rl := remoteLeader{Leader: from, Term: term, InSync: make([]multiraft.NodeID, 0, n)}
		for range n {
			v, err := next()
			if err != nil {
				return nil, err
			}
			rl.InSync = append(rl.InSync, multiraft.NodeID(v))
		}
		hw, err := next()
		if err != nil {
			return nil, err
		}
		start, err := next()
		if err != nil || hw > math.MaxInt64 || start > hw {
			return nil, errLeadersEncoding
		}
		rl.HighWatermark, rl.LogStart = int64(hw), int64(start)
		out[multiraft.GroupID(g)] = rl
	}
	if len(b) != 0 {
		return nil, errLeadersEncoding
	}
	return out, nil
}
