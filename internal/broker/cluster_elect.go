package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/raft/v3"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// Preferred-leader elections (Kafka's ElectLeaders, PREFERRED; kafka-leader-election.sh):
// a partition's preferred leader is the first of its replicas. Each node hands such
// partitions back by itself every balanceEvery; ElectPreferredLeader does it now, for an
// operator who wants the leaders spread before a benchmark or after maintenance. Raft
// moves leadership only from the leader (a transfer: the leader stops taking proposals
// and tells the target, once caught up, to campaign), so the request travels to the
// partition's leader over the node-to-node request channel, as a marker does
// (cluster_txn_markers.go), and its answer comes once the preferred replica leads or the
// transfer failed. An unclean election has no Raft equivalent: a leader needs a quorum's
// votes, and sluice never makes one from a replica out of sync.

// ErrElectionNotNeeded: the preferred replica already leads the partition.
var ErrElectionNotNeeded = errors.New("the preferred replica already leads the partition")

// ErrPreferredLeaderNotAvailable: the preferred replica is not alive and caught up with
// the leader, so it cannot take over yet.
var ErrPreferredLeaderNotAvailable = errors.New("the preferred replica is not in sync with the leader")

// ErrElectionTimedOut: the transfer to the preferred replica did not finish in time (it
// may still; Status shows the leader).
var ErrElectionTimedOut = errors.New("the preferred replica did not take over in time")

// electRequestTag is an election request's first (and only) byte.
const electRequestTag = 'E'

// An election request's answer: a code, then for electNotLeader the leader's id (0:
// unknown).
const (
	electDone         = 0
	electNotNeeded    = 1
	electNotAvailable = 2
	electTimedOut     = 3
	electNotLeader    = 4
)

// electWait bounds how long the leader waits for a transfer to finish; raft drops a
// transfer after an election timeout, far sooner, and the wait ends then too.
const electWait = 10 * time.Second

// ElectPreferredLeader makes topic/partition's preferred replica its leader, asking the
// partition's leader wherever it is. It returns nil once the preferred replica leads,
// ErrElectionNotNeeded if it did already, ErrPreferredLeaderNotAvailable if it is not in
// sync, ErrElectionTimedOut, or a NotLeaderError when no leader could be found.
func (b *Broker) ElectPreferredLeader(ctx context.Context, topic string, partition int32) error {
	c := b.cluster
	if c == nil {
		return ErrElectionNotNeeded // one node: it is every partition's only replica
	}
	_, p, err := b.streams.partition(topic, partition)
	if err != nil {
		return err
	}
	group, replicas := c.partitionGroup(topic, p)
	var leader multiraft.NodeID
	if h := p.repl.Load(); h != nil {
		leader, _ = h.part.Leader()
	}
	return c.elect(ctx, electTarget{what: fmt.Sprintf("%s/%d", topic, partition), group: group, replicas: replicas,
		leader: leader, serveHere: func(ctx context.Context) []byte { return b.serveElect(ctx, p) }})
}

// ElectPreferredQueueLeader makes a catalog queue's preferred replica its leader, as
// ElectPreferredLeader does a partition's: no Kafka API names a queue, so this is
// `sluice cluster elect --queue`. ErrNotClustered on a single node.
func (b *Broker) ElectPreferredQueueLeader(ctx context.Context, name string) error {
	c := b.cluster
	if c == nil {
		return ErrNotClustered
	}
	cq, err := c.catalogQueue(name)
	if err != nil {
		return err
	}
	var leader multiraft.NodeID
	if h := c.hostedQueue(name); h != nil && h.group == cq.Group {
		if st, err := c.host.Status(h.group); err == nil {
			leader = st.Leader
		}
	}
	return c.elect(ctx, electTarget{what: "queue " + name, group: cq.Group, replicas: cq.Replicas, leader: leader,
		serveHere: func(ctx context.Context) []byte { return c.serveQueueElect(ctx, name) }})
}

// electTarget is a partition's or a queue's group to elect the preferred leader of.
type electTarget struct {
	what      string
	group     multiraft.GroupID
	replicas  []multiraft.NodeID // the first is the preferred leader
	leader    multiraft.NodeID   // as this node knows it (0: unknown)
	serveHere func(context.Context) []byte
}

// elect asks the leader this node knows of, else each replica in turn: one not leading
// names the leader it knows, which is asked next.
func (c *clusterRT) elect(ctx context.Context, t electTarget) error {
	if len(t.replicas) == 0 {
		return &NotLeaderError{What: t.what}
	}
	asked := map[multiraft.NodeID]bool{}
	next := t.replicas[0]
	if t.leader != 0 {
		next = t.leader
	}
	for len(asked) <= len(t.replicas) && ctx.Err() == nil {
		to := next
		asked[to] = true
		var answer []byte
		if to == c.node {
			answer = t.serveHere(ctx)
		} else {
			var err error
			answer, err = c.host.Request(ctx, to, t.group, []byte{electRequestTag})
			if err != nil {
				answer = electAnswer(electNotLeader, 0)
				c.log.Debug("cluster: election request failed", "group", t.what, "node", uint64(to), "err", err)
			}
		}
		code, leader, err := decodeElectAnswer(answer)
		if err != nil {
			return err
		}
		switch code {
		case electDone:
			return nil
		case electNotNeeded:
			return ErrElectionNotNeeded
		case electNotAvailable:
			return ErrPreferredLeaderNotAvailable
		case electTimedOut:
			return ErrElectionTimedOut
		}
		next = leader
		if next == 0 || asked[next] {
			i := slices.IndexFunc(t.replicas, func(r multiraft.NodeID) bool { return !asked[r] })
			if i < 0 {
				break
			}
			next = t.replicas[i]
		}
	}
	if ctx.Err() != nil {
		return ErrElectionTimedOut
	}
	return &NotLeaderError{What: t.what}
}

// partitionGroup is the partition's Raft group and replicas: as hosted here, else as the
// catalog has them.
func (c *clusterRT) partitionGroup(topic string, p *partitionRT) (multiraft.GroupID, []multiraft.NodeID) {
	if h := p.repl.Load(); h != nil {
		return h.group, h.replicas
	}
	if ct := c.meta.State().Topics[topic]; ct != nil && int(p.index) < len(ct.Partitions) {
		cp := ct.Partitions[p.index]
		return cp.Group, cp.Replicas
	}
	return 0, nil
}

// serveElect answers an election request for a partition on this node.
func (b *Broker) serveElect(ctx context.Context, p *partitionRT) []byte {
	h := p.repl.Load()
	if h == nil || len(h.replicas) == 0 {
		return electAnswer(electNotLeader, 0)
	}
	return b.cluster.serveElectGroup(ctx, h.group, h.replicas[0], fmt.Sprintf("%s/%d", p.topic, p.index))
}

// serveQueueElect answers an election request for a queue on this node.
func (c *clusterRT) serveQueueElect(ctx context.Context, name string) []byte {
	cq := c.meta.State().Queues[name]
	h := c.hostedQueue(name)
	if cq == nil || h == nil || h.group != cq.Group || len(cq.Replicas) == 0 {
		return electAnswer(electNotLeader, 0)
	}
	return c.serveElectGroup(ctx, cq.Group, cq.Replicas[0], "queue "+name)
}

// serveElectGroup answers an election request for group on this node: not the leader
// (naming the one it knows), not needed, not available, or the transfer's outcome once it
// is over.
func (c *clusterRT) serveElectGroup(ctx context.Context, group multiraft.GroupID, preferred multiraft.NodeID, what string) []byte {
	st, err := c.host.Status(group)
	if err != nil || st.Role != raft.StateLeader {
		return electAnswer(electNotLeader, st.Leader)
	}
	if preferred == c.node {
		return electAnswer(electNotNeeded, 0)
	}
	if !slices.Contains(st.InSync, preferred) {
		return electAnswer(electNotAvailable, 0)
	}
	if err := c.host.TransferLeadership(group, preferred); err != nil {
		return electAnswer(electNotAvailable, 0)
	}
	c.log.Info("cluster: electing the preferred leader", "group", what, "to", uint64(preferred))
	ctx, cancel := context.WithTimeout(ctx, electWait)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := c.host.Status(group)
		switch {
		case err == nil && st.Leader == preferred:
			return electAnswer(electDone, 0)
		case err == nil && st.Role == raft.StateLeader && st.Transferring == 0:
			// raft dropped the transfer (the replica did not campaign within an
			// election timeout: it died, or fell behind).
			return electAnswer(electNotAvailable, 0)
		}
		select {
		case <-ctx.Done():
			return electAnswer(electTimedOut, 0)
		case <-tick.C:
		}
	}
}

// electAnswer encodes an answer: code, and the leader's id after electNotLeader.
func electAnswer(code byte, leader multiraft.NodeID) []byte {
	if code != electNotLeader {
		return []byte{code}
	}
	return binary.AppendUvarint([]byte{code}, uint64(leader))
}

var errBadElectAnswer = errors.New("broker: malformed election answer")

func decodeElectAnswer(b []byte) (code byte, leader multiraft.NodeID, err error) {
	if len(b) == 0 || b[0] > electNotLeader {
		return 0, 0, errBadElectAnswer
	}
	if b[0] != electNotLeader {
		if len(b) != 1 {
			return 0, 0, errBadElectAnswer
		}
		return b[0], 0, nil
	}
	id, n := binary.Uvarint(b[1:])
	if n <= 0 || 1+n != len(b) {
		return 0, 0, fmt.Errorf("%w: leader %x", errBadElectAnswer, b[1:])
	}
	return electNotLeader, multiraft.NodeID(id), nil
}

// LeadersNotPreferred counts the partitions and queues this node leads whose preferred
// leader is another node (0 outside a cluster), for /metrics: with the automatic hand-back
// off (--cluster-leader-balance 0) it is what an operator elects away.
func (b *Broker) LeadersNotPreferred() int {
	c := b.cluster
	if c == nil {
		return 0
	}
	n := 0
	leadsElsewhere := func(g multiraft.GroupID, preferred multiraft.NodeID) bool {
		if preferred == c.node {
			return false
		}
		st, err := c.host.Status(g)
		return err == nil && st.Role == raft.StateLeader
	}
	for _, t := range b.streams.topicList() {
		_, parts := t.snapshot()
		for _, p := range parts {
			if h := p.repl.Load(); h != nil && len(h.replicas) > 0 && leadsElsewhere(h.group, h.replicas[0]) {
				n++
			}
		}
	}
	cat := c.meta.State()
	hosted := c.hostedQueueList()
	for _, h := range hosted {
		if cq := cat.Queues[h.name]; cq != nil && cq.Group == h.group && len(cq.Replicas) > 0 && leadsElsewhere(h.group, cq.Replicas[0]) {
			n++
		}
	}
	return n
}
