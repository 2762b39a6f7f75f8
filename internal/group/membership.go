package group

import (
	"slices"
	"strings"
	"time"
)

// Durable membership (Config.DurableMembership; a cluster turns it on).
//
// A classic group's membership — generation, state, protocol, leader, and
// every member with its protocols, timeouts and assignment — is returned
// as one EventGroupMembers record whenever that changes: a member added
// or removed, a rebalance started, a generation formed, an assignment
// made, a static member replaced. Heartbeats change nothing recorded. A
// coordinator that replays the records (Apply, then Resume) has the
// members of the last record as they were, with fresh sessions, so after
// a coordinator moves members heartbeat on rather than rejoin, as
// Kafka's GroupMetadata records allow.
//
// A group becomes Stable only once its record is durable, as in Kafka,
// where a SyncGroup is answered after the group's record is written: the
// leader's Sync (and a BrokerAssigns generation) leaves the group
// CompletingRebalance and "storing", every sync and join waits, and the
// caller reports the record durable with Stored, which makes the group
// Stable and answers them. So no member ever holds an assignment that a
// new coordinator would not know. Everything else (a join answered, a
// removal) is answered at once: a coordinator lost before the record is
// durable costs its members a rejoin, never a second owner.
//
// KIP-848 consumer groups are not recorded: their membership is still
// soft state (members rejoin at epoch 0 after a restart).

// Membership is an EventGroupMembers record's body.
type Membership struct {
	Generation int32
	// State is Empty, PreparingRebalance, CompletingRebalance or Stable;
	// Empty has no members.
	State    State
	Protocol string
	Leader   string
	Members  []MemberRecord // in join order
}

// MemberRecord is one member of a Membership record.
type MemberRecord struct {
	ID, InstanceID       string
	ClientID, ClientHost string
	SessionTimeout       time.Duration // whole milliseconds
	RebalanceTimeout     time.Duration // whole milliseconds
	Protocols            []Protocol
	Topics               []string
	Assignment           []byte            // LeaderAssigns
	Partitions           []TopicPartitions // BrokerAssigns
}

// recordState is the part of a group's membership a record captures,
// compared to decide whether a call changed it.
type recordState struct {
	generation int32
	state      State
	leader     string
	members    string // member ids in join order, NUL-separated
}

func (g *group) recordKey() recordState {
	var ids strings.Builder
	for _, m := range g.sortedMembers() {
		ids.WriteString(m.id)
		ids.WriteByte(0)
	}
	return recordState{generation: g.generation, state: g.recordedState(), leader: g.leader, members: ids.String()}
}

// recordedState is the state a record gives: a group storing its
// assignment is recorded as the Stable it becomes once that is durable.
func (g *group) recordedState() State {
	if g.storing {
		return Stable
	}
	return g.state
}

// membersEvent is g's record.
func (g *group) membersEvent() Event {
	ms := &Membership{Generation: g.generation, State: g.recordedState(), Protocol: g.protocol, Leader: g.leader}
	for _, m := range g.sortedMembers() {
		ms.Members = append(ms.Members, MemberRecord{
			ID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost,
			SessionTimeout: m.sessionTimeout.Truncate(time.Millisecond), RebalanceTimeout: m.rebalanceTimeout.Truncate(time.Millisecond),
			Protocols: slices.Clone(m.protocols), Topics: slices.Clone(m.topics),
			Assignment: m.assignment, Partitions: m.partitions,
		})
	}
	return Event{Type: EventGroupMembers, Group: g.id, ProtocolType: g.protocolType, Mode: g.mode, Members: ms}
}

// noteMembership appends g's record to out if g's membership changed
// since the last record (Config.DurableMembership only; classic groups).
func (c *Coordinator) noteMembership(g *group, out *Output) {
	if !c.cfg.DurableMembership || g == nil || c.groups[g.id] != g {
		return
	}
	if g.cg != nil {
		c.noteConsumer(g, out)
		return
	}
	key := g.recordKey()
	if key == g.recorded {
		return
	}
	if g.recorded == (recordState{}) && key.state == Empty && len(g.members) == 0 {
		return // never recorded and still nothing to record
	}
	g.recorded = key
	out.Events = append(out.Events, g.membersEvent())
}

// noteAllMemberships is noteMembership for every group (Tick, SetPartitions).
func (c *Coordinator) noteAllMemberships(out *Output) {
	if !c.cfg.DurableMembership {
		return
	}
	for _, id := range sortedKeys(c.groups) {
		c.noteMembership(c.groups[id], out)
	}
}

// RecordMemberships turns Config.DurableMembership on in a running
// coordinator (a cluster whose every node came to read the records) and
// returns the record of every group that has members, so that a
// coordinator replayed from the log from now on keeps the groups formed
// before. Once on, it returns nothing.
func (c *Coordinator) RecordMemberships() Output {
	var out Output
	if c.cfg.DurableMembership {
		return out
	}
	c.cfg.DurableMembership = true
	c.noteAllMemberships(&out)
	return out
}

// store starts storing g's assignment (durable mode): the group stays
// CompletingRebalance, with every join and sync waiting, until Stored.
func (g *group) store() {
	g.storing = true
}

// Stored reports the record of group's Stable generation durable: a group
// still storing that generation becomes Stable, and every sync and join
// waiting on it is answered. Anything else (the generation moved on, the
// group was rebuilt) is a no-op.
func (c *Coordinator) Stored(now time.Time, group string, generation int32) Output {
	var out Output
	g := c.groups[group]
	if g == nil || !g.storing || g.generation != generation || g.state != CompletingRebalance {
		return out
	}
	g.storing = false
	g.setState(Stable, &out)
	for _, m := range g.sortedMembers() {
		if m.joinTicket != 0 {
			out.Joins = append(out.Joins, g.joinResult(m, m.joinTicket))
			m.joinTicket = 0
		}
		if m.syncTicket != 0 {
			out.Syncs = append(out.Syncs, g.syncResult(m, m.syncTicket))
			m.syncTicket = 0
		}
		m.lastSeen = now
	}
	return out
}

// applyMembers replaces g's classic membership with a record's.
func (c *Coordinator) applyMembers(ev Event) {
	g := c.getOrCreate(ev.Group)
	ms := ev.Members
	g.cg, g.recordedCG = nil, nil
	g.protocolType, g.mode = ev.ProtocolType, ev.Mode
	g.generation, g.state, g.protocol, g.leader = ms.Generation, ms.State, ms.Protocol, ms.Leader
	g.storing = false
	g.members, g.static = make(map[string]*member, len(ms.Members)), make(map[string]string)
	g.rebalanceDeadline, g.joinNotBefore = time.Time{}, time.Time{}
	for _, r := range ms.Members {
		g.seq++
		m := &member{
			id: r.ID, instanceID: r.InstanceID, clientID: r.ClientID, clientHost: r.ClientHost,
			protocols: slices.Clone(r.Protocols), topics: slices.Clone(r.Topics),
			sessionTimeout: r.SessionTimeout, rebalanceTimeout: r.RebalanceTimeout,
			assignment: r.Assignment, partitions: r.Partitions, seq: g.seq,
		}
		g.members[m.id] = m
		if m.instanceID != "" {
			g.static[m.instanceID] = m.id
		}
	}
	g.recorded = g.recordKey()
}

// Resume starts the clocks of members restored by Apply: each gets a full
// session from now, and a rebalance under way a full rebalance timeout; a
// BrokerAssigns group whose topics changed partition counts rebalances
// (and its record is in the Output).
// Call it once after replaying the records and KnowPartitions, before
// serving.
func (c *Coordinator) Resume(now time.Time) Output {
	var out Output
	for _, id := range sortedKeys(c.groups) {
		g := c.groups[id]
		if g.cg != nil {
			resumeConsumer(g.cg, now)
		}
		for _, m := range g.members {
			if m.lastSeen.IsZero() {
				m.lastSeen = now
			}
		}
		if (g.state == PreparingRebalance || g.state == CompletingRebalance) && g.rebalanceDeadline.IsZero() {
			g.rebalanceDeadline = now.Add(maxRebalanceTimeout(g))
		}
		if g.mode == BrokerAssigns && g.state == Stable && !c.covers(g) {
			// A partition count changed while no coordinator had the group:
			// assign again.
			out.merge(c.prepareRebalance(g, now))
			c.noteMembership(g, &out)
		}
	}
	return out
}

// covers reports whether a BrokerAssigns group's assignment gives every
// partition of its members' topics (as KnowPartitions counts them) one
// owner: false once a count changed since the assignment.
func (c *Coordinator) covers(g *group) bool {
	want := map[string]int32{}
	for _, m := range g.members {
		for _, t := range m.topics {
			want[t] = c.partitions[t]
		}
	}
	have := map[string]int32{}
	for _, m := range g.members {
		for _, tp := range m.partitions {
			for _, p := range tp.Partitions {
				if p >= want[tp.Topic] {
					return false
				}
			}
			have[tp.Topic] += int32(len(tp.Partitions))
		}
	}
	for t, n := range want {
		if have[t] != n {
			return false
		}
	}
	return true
}

// KnowPartitions records a topic's partition count without rebalancing
// anything: for a coordinator rebuilt from its journal, whose restored
// groups were formed with these counts already.
func (c *Coordinator) KnowPartitions(topic string, n int32) {
	if n > 0 {
		c.partitions[topic] = n
	}
}
