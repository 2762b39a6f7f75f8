package group

import (
	"maps"
	"slices"
	"time"
)

// computeTarget runs the group's assignor over its members' subscriptions
// and records the result as the target of the current group epoch.
// Static members that left for now (epoch -2) keep their place in it.
func (c *Coordinator) computeTarget(g *group) {
	cg := g.cg
	ids := sortedKeys(cg.members)
	subs := make([]assignee, 0, len(ids))
	for _, id := range ids {
		subs = append(subs, assignee{id: id, topics: cg.members[id].resolvedTopics(c.partitions), prev: cg.target[id]})
	}
	cg.assignor = c.pickAssignor(cg)
	if cg.assignor == AssignorRange {
		cg.target = assignRangeServer(subs, c.partitions)
	} else {
		cg.target = assignUniform(subs, c.partitions)
	}
	cg.assignmentEpoch = cg.epoch
}

// pickAssignor is the assignor most members asked for (ties: the one
// first in group.consumer.assignors); with no request, the first
// configured one, as Kafka does.
func (c *Coordinator) pickAssignor(cg *consumerGroup) string {
	votes := map[string]int{}
	for _, m := range cg.members {
		if m.assignor != "" {
			votes[m.assignor]++
		}
	}
	best := c.cfg.Consumer.Assignors[0]
	for _, a := range c.cfg.Consumer.Assignors {
		if votes[a] > votes[best] {
			best = a
		}
	}
	return best
}

// reconcile moves m one step towards its target (Kafka's current
// assignment builder). A member with partitions to revoke keeps its epoch
// and loses them from its assignment; once a heartbeat reports them no
// longer owned they are free, and the member takes the target epoch and
// every target partition that no other member still holds (the others
// come in later heartbeats, as their owners release them).
func (cg *consumerGroup) reconcile(m *cmember, owned []TopicPartitions, now time.Time) {
	if m.epoch == StaticLeaveEpoch {
		return
	}
	if m.state == memberUnrevoked {
		if owned == nil || intersects(fromList(owned), m.revoking) {
			return
		}
		cg.release(m, m.revoking)
		m.revoking, m.state = nil, memberStable
	}
	if m.state == memberStable && m.epoch == cg.assignmentEpoch {
		return
	}
	target := cg.target[m.id]
	revoke := tpSet{}
	for tp := range m.assigned {
		if !target[tp] {
			revoke[tp] = true
		}
	}
	if len(revoke) > 0 {
		for tp := range revoke {
			delete(m.assigned, tp)
		}
		m.revoking, m.state = revoke, memberUnrevoked
		m.revokeDeadline = now.Add(m.rebalanceTimeout)
		return
	}
	if m.epoch != cg.assignmentEpoch {
		m.prevEpoch, m.epoch = m.epoch, cg.assignmentEpoch
	}
	m.state = memberStable
	for _, tp := range sortedTPs(target) {
		if _, ok := m.assigned[tp]; ok {
			continue
		}
		if o, held := cg.owner[tp]; held && o != m.id {
			m.state = memberUnreleased
			continue
		}
		cg.owner[tp] = m.id
		m.assigned[tp] = m.epoch
	}
}

func intersects(a, b tpSet) bool {
	for tp := range a {
		if b[tp] {
			return true
		}
	}
	return false
}

func sortedTPs(s tpSet) []topicPartition {
	out := slices.Collect(maps.Keys(s))
	slices.SortFunc(out, cmpTP)
	return out
}

func cmpTP(a, b topicPartition) int {
	if a.topic != b.topic {
		if a.topic < b.topic {
			return -1
		}
		return 1
	}
	return int(a.partition) - int(b.partition)
}
