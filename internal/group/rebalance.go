package group

import "time"

// prepareRebalance moves g to PreparingRebalance: every member must join
// again before a new generation forms. Waiting syncs of the abandoned
// generation are answered ErrRebalanceInProgress so their members rejoin.
func (c *Coordinator) prepareRebalance(g *group, now time.Time) Output {
	var out Output
	if g.state == PreparingRebalance {
		return out
	}
	for _, m := range g.sortedMembers() {
		if m.syncTicket != 0 {
			out.Syncs = append(out.Syncs, SyncResult{Ticket: m.syncTicket, Err: ErrRebalanceInProgress})
			// Waiting proved it alive; its session restarts now so it has
			// a full session timeout to rejoin.
			m.syncTicket, m.lastSeen = 0, now
		}
	}
	g.storing = false // a record not yet durable is of a generation abandoned now
	g.rebalanceDeadline = now.Add(maxRebalanceTimeout(g))
	g.joinNotBefore = time.Time{}
	if g.state == Empty && c.cfg.InitialRebalanceDelay > 0 {
		g.joinNotBefore = now.Add(c.cfg.InitialRebalanceDelay)
		if g.rebalanceDeadline.Before(g.joinNotBefore) {
			g.rebalanceDeadline = g.joinNotBefore
		}
	}
	g.setState(PreparingRebalance, &out)
	out.merge(c.maybeCompleteJoin(g, now))
	return out
}

// maybeCompleteJoin forms the next generation once everyone has joined.
func (c *Coordinator) maybeCompleteJoin(g *group, now time.Time) Output {
	if g.state != PreparingRebalance || !g.allJoined() || now.Before(g.joinNotBefore) {
		return Output{}
	}
	return c.completeJoin(g, now)
}

// completeJoin ends PreparingRebalance: members that did not rejoin are
// dropped, the generation advances and every waiting join is answered.
// LeaderAssigns groups then wait for the leader's Sync; BrokerAssigns
// groups are assigned here and become Stable at once.
func (c *Coordinator) completeJoin(g *group, now time.Time) Output {
	var out Output
	for _, m := range g.sortedMembers() {
		if m.joinTicket == 0 {
			out.Removed = append(out.Removed, c.forget(g, m.id, RemovedNotRejoined))
		}
	}
	g.generation++
	g.rebalanceDeadline, g.joinNotBefore = time.Time{}, time.Time{}
	if len(g.members) == 0 {
		g.protocol, g.leader = "", ""
		g.setState(Empty, &out)
		return out
	}
	g.protocol = g.selectProtocol()
	ms := g.sortedMembers()
	if g.members[g.leader] == nil {
		g.leader = ms[0].id
	}
	for _, m := range ms {
		m.assignment, m.partitions = nil, nil
		m.lastSeen = now
	}
	g.rebalanceDeadline = now.Add(maxRebalanceTimeout(g))
	if g.mode == BrokerAssigns && c.cfg.DurableMembership {
		// The joins wait for the record of the assignment (Stored).
		c.assignPartitions(g)
		g.setState(CompletingRebalance, &out)
		g.store()
		return out
	}
	if g.mode == BrokerAssigns {
		c.assignPartitions(g)
		g.setState(Stable, &out)
	} else {
		g.setState(CompletingRebalance, &out)
	}
	for _, m := range ms {
		out.Joins = append(out.Joins, g.joinResult(m, m.joinTicket))
		m.joinTicket = 0
	}
	return out
}

// joinResult is the answer for m in the current generation.
func (g *group) joinResult(m *member, t Ticket) JoinResult {
	r := JoinResult{
		Ticket: t, MemberID: m.id, Generation: g.generation, Protocol: g.protocol,
		ProtocolType: g.protocolType, Leader: g.leader, Assignment: m.partitions,
	}
	if g.mode == LeaderAssigns && m.id == g.leader {
		for _, o := range g.sortedMembers() {
			r.Members = append(r.Members, GroupMember{MemberID: o.id, InstanceID: o.instanceID, Metadata: o.metadataFor(g.protocol)})
		}
	}
	return r
}

// forget deletes a member without answering or rebalancing, and returns
// the report of its removal.
func (c *Coordinator) forget(g *group, id string, why RemoveReason) Removal {
	m := g.members[id]
	r := Removal{Group: g.id, MemberID: id, InstanceID: m.instanceID, Reason: why}
	if m.instanceID != "" && g.static[m.instanceID] == id {
		delete(g.static, m.instanceID)
	}
	delete(g.members, id)
	return r
}

// removeMember drops a member (leave or expiry), answers whatever it was
// waiting on with ErrUnknownMember, and rebalances the rest.
func (c *Coordinator) removeMember(g *group, id string, now time.Time, why RemoveReason) Output {
	var out Output
	m := g.members[id]
	if m == nil {
		return out
	}
	if m.joinTicket != 0 {
		out.Joins = append(out.Joins, JoinResult{Ticket: m.joinTicket, Err: ErrUnknownMember, MemberID: id, Generation: -1})
	}
	if m.syncTicket != 0 {
		out.Syncs = append(out.Syncs, SyncResult{Ticket: m.syncTicket, Err: ErrUnknownMember})
	}
	out.Removed = append(out.Removed, c.forget(g, id, why))
	switch g.state {
	case Stable, CompletingRebalance:
		out.merge(c.prepareRebalance(g, now))
	case PreparingRebalance:
		out.merge(c.maybeCompleteJoin(g, now))
	}
	return out
}

// tickGroup applies the passage of time to one group.
func (c *Coordinator) tickGroup(g *group, now time.Time) Output {
	var out Output
	for id, deadline := range g.pending {
		if !now.Before(deadline) {
			delete(g.pending, id)
		}
	}
	var expired []string
	for _, m := range g.sortedMembers() {
		if m.expired(now) {
			expired = append(expired, m.id)
		}
	}
	for _, id := range expired {
		out.merge(c.removeMember(g, id, now, RemovedSessionExpired))
	}
	if g.state == PreparingRebalance && !now.Before(g.rebalanceDeadline) {
		out.merge(c.completeJoin(g, now))
	}
	if g.state == CompletingRebalance && !now.Before(g.rebalanceDeadline) {
		// Whoever has not synced by now (the leader at least) is dropped
		// and the rest are told to rejoin. Decide before removing: the
		// first removal answers the others' syncs, which would make them
		// look unsynced too.
		var drop []string
		for _, m := range g.sortedMembers() {
			if m.syncTicket == 0 && m.joinTicket == 0 { // a join held while storing waits too
				drop = append(drop, m.id)
			}
		}
		for _, id := range drop {
			out.merge(c.removeMember(g, id, now, RemovedNotSynced))
		}
	}
	out.merge(c.maybeCompleteJoin(g, now))
	return out
}

func maxRebalanceTimeout(g *group) time.Duration {
	var timeout time.Duration
	for _, m := range g.members {
		timeout = max(timeout, m.rebalanceTimeout)
	}
	return timeout
}
