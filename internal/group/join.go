package group

import (
	"slices"
	"time"
)

// Join adds or refreshes a member. The answer for the returned ticket is
// in the returned Output when it is known at once (an error, a member id
// to retry with, an unchanged generation, or the join that completed the
// rebalance); otherwise a later call's Output carries it, once every
// member has joined or the rebalance timeout passed (see Tick).
func (c *Coordinator) Join(now time.Time, req JoinRequest) (Ticket, Output) {
	t, out := c.join(now, req)
	c.noteMembership(c.groups[req.Group], &out)
	return t, out
}

func (c *Coordinator) join(now time.Time, req JoinRequest) (Ticket, Output) {
	t := c.ticket()
	if req.RebalanceTimeout <= 0 {
		req.RebalanceTimeout = req.SessionTimeout
	}
	if err := c.checkJoin(req); err != nil {
		return t, failJoin(t, req.MemberID, err)
	}
	g := c.groups[req.Group]
	if g == nil && req.MemberID != "" {
		return t, failJoin(t, req.MemberID, ErrUnknownMember)
	}
	g = c.getOrCreate(req.Group)
	if g.cg != nil {
		if len(g.cg.members) > 0 {
			// A consumer (KIP-848) group with members: classic joins are
			// refused, as Kafka does without online migration.
			return t, failJoin(t, req.MemberID, ErrInconsistentProtocol)
		}
		g.cg = nil // an empty consumer group becomes classic
	}
	if !g.fits(req) {
		return t, failJoin(t, req.MemberID, ErrInconsistentProtocol)
	}
	if req.MemberID == "" {
		return t, c.joinNew(g, now, req, t)
	}
	return t, c.joinKnown(g, now, req, t)
}

func failJoin(t Ticket, memberID string, err error) Output {
	return Output{Joins: []JoinResult{{Ticket: t, Err: err, MemberID: memberID, Generation: -1}}}
}

func (c *Coordinator) checkJoin(req JoinRequest) error {
	if req.Group == "" {
		return ErrInvalidGroupID
	}
	if req.SessionTimeout < c.cfg.MinSessionTimeout || req.SessionTimeout > c.cfg.MaxSessionTimeout {
		return ErrInvalidSessionTimeout
	}
	if req.Mode == BrokerAssigns {
		for _, p := range req.Protocols {
			if p.Name != AssignorRange && p.Name != AssignorRoundRobin {
				return ErrUnknownAssignor
			}
		}
	}
	return nil
}

// joinNew handles a join without a member id: a static member taking its
// place back, a first join that must be repeated with an id (v4+), or a
// plain new member.
func (c *Coordinator) joinNew(g *group, now time.Time, req JoinRequest, t Ticket) Output {
	if req.InstanceID != "" {
		if old := g.static[req.InstanceID]; old != "" && g.members[old] != nil {
			return c.replaceStatic(g, now, req, t, old)
		}
	}
	if c.cfg.MaxGroupSize > 0 && len(g.members)+len(g.pending) >= c.cfg.MaxGroupSize {
		return failJoin(t, "", ErrGroupMaxSize)
	}
	id := c.newMemberID(req.ClientID)
	if req.RequireKnownMemberID && req.InstanceID == "" {
		// The id is reserved for one session timeout; a client that never
		// comes back does not hold up rebalances for longer than that.
		g.pending[id] = now.Add(req.SessionTimeout)
		return failJoin(t, id, ErrMemberIDRequired)
	}
	return c.addMember(g, now, req, t, id)
}

// joinKnown handles a join that names a member id.
func (c *Coordinator) joinKnown(g *group, now time.Time, req JoinRequest, t Ticket) Output {
	id := req.MemberID
	if _, ok := g.pending[id]; ok {
		delete(g.pending, id)
		return c.addMember(g, now, req, t, id)
	}
	m := g.members[id]
	if err := g.checkMember(id, req.InstanceID); err != nil {
		return failJoin(t, id, err)
	}
	m.lastSeen = now
	var out Output
	if m.joinTicket != 0 {
		// A join resent while one waits: the older request's connection
		// has given up on it; only the newest gets the answer.
		out.Joins = append(out.Joins, JoinResult{Ticket: m.joinTicket, Err: ErrRebalanceInProgress, MemberID: id, Generation: -1})
		m.joinTicket = 0
	}
	same := m.sameProtocols(req.Protocols) && slices.Equal(m.topics, req.Topics)
	switch {
	case g.state == PreparingRebalance:
		updateMember(m, req, t)
		out.merge(c.maybeCompleteJoin(g, now))
	case same && g.storing:
		// The generation's record is on its way (durable membership): the
		// answer, which may carry the assignment, waits for Stored.
		m.joinTicket = t
	case same && (g.state == CompletingRebalance || (g.state == Stable && id != g.leader)):
		// Nothing changed: this is a retry of a join whose answer was lost.
		out.Joins = append(out.Joins, g.joinResult(m, t))
	default:
		// The leader rejoining (it may have seen a metadata change) or
		// changed protocols start a new generation, as in Kafka.
		updateMember(m, req, t)
		out.merge(c.prepareRebalance(g, now))
	}
	return out
}

// checkMember validates a member id (and instance id, when given)
// against the group, as every member request does.
func (g *group) checkMember(id, instanceID string) error {
	if instanceID != "" {
		if owner, ok := g.static[instanceID]; ok && owner != id {
			return ErrFencedInstanceID
		}
	}
	if g.members[id] == nil {
		return ErrUnknownMember
	}
	return nil
}

func updateMember(m *member, req JoinRequest, t Ticket) {
	m.protocols = slices.Clone(req.Protocols)
	m.topics = slices.Clone(req.Topics)
	m.sessionTimeout, m.rebalanceTimeout = req.SessionTimeout, req.RebalanceTimeout
	m.clientID, m.clientHost = req.ClientID, req.ClientHost
	m.joinTicket = t
}

// addMember admits a new member and starts (or joins) a rebalance.
func (c *Coordinator) addMember(g *group, now time.Time, req JoinRequest, t Ticket, id string) Output {
	var protocol []Event
	if len(g.members) == 0 && (g.protocolType != req.ProtocolType || g.mode != req.Mode) {
		g.protocolType, g.mode = req.ProtocolType, req.Mode
		protocol = []Event{{Type: EventGroupProtocol, Group: g.id, ProtocolType: g.protocolType, Mode: g.mode}}
	}
	g.seq++
	m := &member{id: id, instanceID: req.InstanceID, seq: g.seq, lastSeen: now}
	updateMember(m, req, t)
	g.members[id] = m
	if req.InstanceID != "" {
		g.static[req.InstanceID] = id
	}
	var out Output
	if g.state == PreparingRebalance {
		out = c.maybeCompleteJoin(g, now)
	} else {
		out = c.prepareRebalance(g, now)
	}
	out.Events = append(protocol, out.Events...)
	return out
}

// replaceStatic gives a static member's place to a new member id and
// fences the old one. If nothing else changed and the group is Stable, the
// new id inherits the assignment without a rebalance: that is the point of
// static membership (a restarted pod does not shuffle partitions).
func (c *Coordinator) replaceStatic(g *group, now time.Time, req JoinRequest, t Ticket, oldID string) Output {
	old := g.members[oldID]
	var out Output
	if old.joinTicket != 0 {
		out.Joins = append(out.Joins, JoinResult{Ticket: old.joinTicket, Err: ErrFencedInstanceID, MemberID: oldID, Generation: -1})
	}
	if old.syncTicket != 0 {
		out.Syncs = append(out.Syncs, SyncResult{Ticket: old.syncTicket, Err: ErrFencedInstanceID})
	}
	id := c.newMemberID(req.ClientID)
	m := *old
	m.id, m.lastSeen, m.joinTicket, m.syncTicket = id, now, 0, 0
	out.Removed = append(out.Removed, c.forget(g, oldID, RemovedReplaced))
	g.members[id] = &m
	g.static[req.InstanceID] = id
	wasLeader := g.leader == oldID
	if wasLeader {
		g.leader = id
	}
	if g.state == Stable && !wasLeader && m.sameProtocols(req.Protocols) && slices.Equal(m.topics, req.Topics) {
		out.Joins = append(out.Joins, g.joinResult(&m, t))
		return out
	}
	updateMember(&m, req, t)
	if g.state == PreparingRebalance {
		out.merge(c.maybeCompleteJoin(g, now))
	} else {
		out.merge(c.prepareRebalance(g, now))
	}
	return out
}
