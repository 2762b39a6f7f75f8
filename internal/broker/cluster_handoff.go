package broker

// Stopping a node of a cluster (docs/cluster.md, "Stopping a node"). A node that simply
// stopped would leave every group it leads without a leader until its peers counted it
// down and elected one: an election timeout at the least (10–20 ticks, 0.5–1 s at
// --cluster-tick 50ms; measured 0.85 s p50 and 1.8 s p99 after a kill), during which
// every producer and consumer of those partitions and queues waits. Kafka's controlled
// shutdown, RabbitMQ's quorum queues and NATS's lame-duck mode move leadership away
// first, and so does a sluice node: before its listeners stop, HandOffLeadership asks raft
// to transfer every group it leads (partitions, queues, the metadata group and with it
// the controller) to an in-sync replica, waits until each has a new leader, and only then
// lets the shutdown go on. A transfer to a caught-up replica is one message and one
// election round, tens of milliseconds; clients see NOT_LEADER_OR_FOLLOWER (Kafka) or
// nothing at all (SQS and the native API, forwarded) instead of a timeout.
//
// While it hands over and until it exits, the node answers its peers that it refuses
// leadership (meta.Catalog.NodeRefusesLeadership), so their leader balancing does not
// hand its preferred groups straight back.

import (
	"context"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"go.etcd.io/raft/v3"
)

// HandOff is what HandOffLeadership did.
type HandOff struct {
	// Led is how many groups this node led, with another voter to take them, when the
	// hand-off began; Kept how many it still led when it ended (none when it finished;
	// the others were handed over, or their leader stepped down having lost its quorum).
	Led, Kept int
	// Alone is how many groups it leads with no other voter (replication factor 1 on a
	// cluster): nobody can take them, and they are unavailable while the node is down.
	Alone int
	Took  time.Duration
}

// handOffPoll is how often the hand-off looks again at the groups still led here.
const handOffPoll = 25 * time.Millisecond

// handOffPatience is how long the hand-off goes on while no group left has a replica to
// take it (every other voter down, behind or refusing) and no transfer is under way:
// then it gives up rather than hold the stop for nothing.
const handOffPatience = time.Second

// HandOffLeadership hands the leadership of every group this node leads to an in-sync
// replica of it, and returns once none is led here any more, or nothing left can be handed
// over (handOffPatience), or ctx ends. From the call on, this node refuses leadership to
// its peers. For a graceful stop: call it before the front-ends drain, while they still
// answer the clients that come meanwhile.
func (b *Broker) HandOffLeadership(ctx context.Context) (HandOff, error) {
	c := b.cluster
	if c == nil {
		return HandOff{}, ErrNotClustered
	}
	c.stopping.Store(true)
	began := time.Now()
	refuses := c.refusingNodes()
	handed := map[multiraft.NodeID]int{} // transfers asked of each node: spread them
	var out HandOff
	var stuckSince time.Time
	for round := 0; ; round++ {
		led, alone := c.ledGroups()
		if round == 0 {
			out.Led, out.Alone = len(led), alone
			if len(led) > 0 {
				c.log.Info("cluster: stopping: handing leadership to other replicas first", "groups", len(led))
			}
		}
		out.Kept = len(led)
		if len(led) == 0 {
			break
		}
		if !c.anyPeerUp(led) { // the last node of a cluster stopping: nobody to wait for
			return c.handOffDone(out, began, "no other replica is up"), nil
		}
		moving := false
		for _, st := range led {
			if st.Transferring != 0 { // raft drops it after an election timeout; then again
				moving = true
				continue
			}
			to := handOffTarget(st, c.node, refuses, handed)
			if to == 0 {
				continue
			}
			if err := c.host.TransferLeadership(st.Group, to); err == nil {
				handed[to]++
				moving = true
			}
		}
		switch {
		case moving:
			stuckSince = time.Time{}
		case stuckSince.IsZero():
			stuckSince = time.Now()
		case time.Since(stuckSince) >= handOffPatience:
			return c.handOffDone(out, began, "no replica in sync to take them"), nil
		}
		select {
		case <-ctx.Done():
			return c.handOffDone(out, began, "out of time"), nil
		case <-time.After(handOffPoll):
		}
	}
	return c.handOffDone(out, began, ""), nil
}

// handOffDone logs the hand-off's end and returns out with its duration.
func (c *clusterRT) handOffDone(out HandOff, began time.Time, why string) HandOff {
	out.Took = time.Since(began)
	attrs := []any{"moved", out.Led - out.Kept, "took", out.Took.Round(time.Millisecond)}
	if out.Alone > 0 {
		attrs = append(attrs, "alone", out.Alone)
	}
	switch {
	case out.Kept > 0 && why == "no other replica is up":
		c.log.Info("cluster: stopping with groups still led here ("+why+")", append(attrs, "kept", out.Kept)...)
	case out.Kept > 0:
		c.log.Warn("cluster: stopping with groups still led here ("+why+"); their other replicas elect a leader once they count this node down",
			append(attrs, "kept", out.Kept)...)
	case out.Led > 0:
		c.log.Info("cluster: stopping: leadership handed over", attrs...)
	case out.Alone > 0:
		c.log.Info("cluster: stopping: no group to hand over", attrs...)
	}
	return out
}

// anyPeerUp reports whether a voter of one of the groups, other than this node, is alive.
func (c *clusterRT) anyPeerUp(led []multiraft.GroupStatus) bool {
	for _, st := range led {
		for _, v := range st.Voters {
			if v != c.node && c.host.PeerAlive(v) {
				return true
			}
		}
	}
	return false
}

// ledGroups returns the status of every group this node leads that has another voter,
// and how many it leads alone.
func (c *clusterRT) ledGroups() (led []multiraft.GroupStatus, alone int) {
	for _, id := range c.host.Groups() {
		st, err := c.host.Status(id)
		if err != nil || st.Role != raft.StateLeader || st.Removed {
			continue
		}
		if len(st.Voters) <= 1 {
			alone++
			continue
		}
		led = append(led, st)
	}
	return led, alone
}

// handOffTarget picks the replica to hand st's group to: an in-sync voter other than self
// whose node does not refuse leadership, the one asked to take the fewest so far (so a
// stopping node's groups spread over the others); 0 when there is none.
func handOffTarget(st multiraft.GroupStatus, self multiraft.NodeID, refuses func(multiraft.NodeID) bool, handed map[multiraft.NodeID]int) multiraft.NodeID {
	var best multiraft.NodeID
	for _, n := range st.InSync {
		if n == self || refuses(n) {
			continue
		}
		if best == 0 || handed[n] < handed[best] {
			best = n
		}
	}
	return best
}
