package group

import "time"

// Sync asks for the member's assignment in the current generation. In a
// LeaderAssigns group waiting for its leader, followers' tickets are
// answered when the leader's Sync arrives (in that call's Output), or with
// ErrRebalanceInProgress if the generation is abandoned first.
func (c *Coordinator) Sync(now time.Time, req SyncRequest) (Ticket, Output) {
	t, out := c.sync(now, req)
	c.noteMembership(c.groups[req.Group], &out)
	return t, out
}

func (c *Coordinator) sync(now time.Time, req SyncRequest) (Ticket, Output) {
	t := c.ticket()
	fail := func(err error) Output { return Output{Syncs: []SyncResult{{Ticket: t, Err: err}}} }
	g := c.groups[req.Group]
	if err := checkSync(g, req); err != nil {
		return t, fail(err)
	}
	m := g.members[req.MemberID]
	m.lastSeen = now
	switch g.state {
	case PreparingRebalance:
		return t, fail(ErrRebalanceInProgress)
	case Stable:
		return t, Output{Syncs: []SyncResult{g.syncResult(m, t)}}
	}
	// CompletingRebalance: wait for the leader, or be the leader.
	var out Output
	if m.syncTicket != 0 {
		out.Syncs = append(out.Syncs, SyncResult{Ticket: m.syncTicket, Err: ErrRebalanceInProgress})
	}
	m.syncTicket = t
	if m.id != g.leader || g.storing {
		return t, out // the leader's assignment, or its record, is on its way
	}
	for _, o := range g.members {
		o.assignment = req.Assignments[o.id] // members the leader left out get nothing
	}
	if c.cfg.DurableMembership {
		g.store() // Stable, and the syncs answered, once Stored
		return t, out
	}
	g.setState(Stable, &out)
	for _, o := range g.sortedMembers() {
		if o.syncTicket != 0 {
			out.Syncs = append(out.Syncs, g.syncResult(o, o.syncTicket))
			o.syncTicket, o.lastSeen = 0, now
		}
	}
	return t, out
}

// checkSync applies Kafka's SyncGroup checks in Kafka's order, so the
// front-end returns the error a real broker would.
func checkSync(g *group, req SyncRequest) error {
	switch {
	case req.Group == "":
		return ErrInvalidGroupID
	case g == nil:
		return ErrUnknownMember
	}
	if err := g.checkMember(req.MemberID, req.InstanceID); err != nil {
		return err
	}
	if req.Generation != g.generation {
		return ErrIllegalGeneration
	}
	if (req.ProtocolType != "" && req.ProtocolType != g.protocolType) || (req.Protocol != "" && req.Protocol != g.protocol) {
		return ErrInconsistentProtocol
	}
	return nil
}

func (g *group) syncResult(m *member, t Ticket) SyncResult {
	return SyncResult{
		Ticket: t, ProtocolType: g.protocolType, Protocol: g.protocol,
		Assignment: m.assignment, Partitions: m.partitions,
	}
}

// HeartbeatRequest keeps a member's session alive.
type HeartbeatRequest struct {
	Group      string
	MemberID   string
	InstanceID string
	Generation int32
}

// Heartbeat refreshes the member's session. ErrRebalanceInProgress tells
// it to rejoin; the session is refreshed anyway so that a member busy
// revoking partitions is not expired for being slow to rejoin.
func (c *Coordinator) Heartbeat(now time.Time, req HeartbeatRequest) error {
	g := c.groups[req.Group]
	if req.Group == "" {
		return ErrInvalidGroupID
	}
	if g == nil {
		return ErrUnknownMember
	}
	if err := g.checkMember(req.MemberID, req.InstanceID); err != nil {
		return err
	}
	if req.Generation != g.generation {
		return ErrIllegalGeneration
	}
	g.members[req.MemberID].lastSeen = now
	if g.state == PreparingRebalance {
		return ErrRebalanceInProgress
	}
	return nil
}

// Leave removes members (LeaveGroup; v3+ names several, static members by
// instance id). errs is index-aligned with refs. The rest of the group
// rebalances; Output carries any join that the departure completed.
func (c *Coordinator) Leave(now time.Time, group string, refs []MemberRef) (errs []error, out Output) {
	g := c.groups[group]
	errs = make([]error, len(refs))
	defer func() { c.noteMembership(g, &out) }()
	for i, r := range refs {
		if g == nil {
			errs[i] = ErrUnknownMember
			continue
		}
		id := r.MemberID
		if id == "" && r.InstanceID != "" {
			id = g.static[r.InstanceID]
		}
		if _, ok := g.pending[id]; ok && id != "" {
			delete(g.pending, id)
			out.merge(c.maybeCompleteJoin(g, now))
			continue
		}
		if err := g.checkMember(id, r.InstanceID); err != nil {
			errs[i] = err
			continue
		}
		out.merge(c.removeMember(g, id, now, RemovedLeft))
	}
	return errs, out
}
