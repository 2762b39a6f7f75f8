package group

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"time"
)

// ConsumerHeartbeat is KIP-848's one request: join (epoch 0), heartbeat
// and reconcile (the member's epoch), leave (-1, or -2 for a static
// member that will come back). Errors are in the result; Output reports
// removed members.
func (c *Coordinator) ConsumerHeartbeat(now time.Time, req ConsumerHeartbeatRequest) (ConsumerHeartbeatResult, Output) {
	res, out := c.consumerHeartbeat(now, req)
	c.noteMembership(c.groups[req.Group], &out)
	return res, out
}

func (c *Coordinator) consumerHeartbeat(now time.Time, req ConsumerHeartbeatRequest) (ConsumerHeartbeatResult, Output) {
	res, out := ConsumerHeartbeatResult{MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}, Output{}
	fail := func(err error) (ConsumerHeartbeatResult, Output) {
		res.Err = err
		return res, out
	}
	if err := c.checkConsumerHeartbeat(req); err != nil {
		return fail(err)
	}
	g := c.groups[req.Group]
	switch {
	case g != nil && g.cg == nil && (len(g.members) > 0 || len(g.pending) > 0):
		return fail(fmt.Errorf("%w: group %s is a classic group with members, not a consumer group", ErrGroupNotFound, req.Group))
	case (g == nil || g.cg == nil) && req.MemberEpoch != JoinEpoch:
		return fail(fmt.Errorf("%w: consumer group %s not found", ErrUnknownMember, req.Group))
	case g == nil:
		g = c.getOrCreate(req.Group)
	}
	if g.cg == nil {
		// An empty classic group (offsets only) becomes a consumer group,
		// as in Kafka; its offsets stay.
		g.cg = newConsumerGroup()
	}
	if g.mode != ConsumerProtocol {
		// Its type is durable, as Kafka's group records are: after a
		// restart it is a consumer group with no members, not classic.
		g.protocolType, g.mode = TypeConsumer, ConsumerProtocol
		out.Events = append(out.Events, Event{Type: EventGroupProtocol, Group: g.id, ProtocolType: TypeConsumer, Mode: ConsumerProtocol})
	}
	if req.MemberEpoch == LeaveEpoch || req.MemberEpoch == StaticLeaveEpoch {
		return c.consumerLeave(g, req, res)
	}
	if req.MemberEpoch == JoinEpoch && req.Owned == nil {
		req.Owned = []TopicPartitions{} // a joining member owns nothing
	}
	m, created, err := c.consumerMember(g, now, req)
	if err != nil {
		return fail(err)
	}
	cg := g.cg
	before := maps.Clone(m.assigned)
	if c.updateSubscription(m, req) || created {
		cg.epoch++
	}
	m.lastSeen, m.clientID, m.clientHost = now, req.ClientID, req.ClientHost
	if cg.epoch > cg.assignmentEpoch {
		c.computeTarget(g)
	}
	cg.reconcile(m, req.Owned, now)
	res.MemberID, res.MemberEpoch = m.id, m.epoch
	res.HeartbeatInterval = c.cfg.Consumer.HeartbeatInterval
	full := req.MemberEpoch == JoinEpoch || (req.RebalanceTimeout >= 0 && req.Topics != nil && req.Owned != nil)
	if full || !sameKeys(before, m.assigned) {
		res.HasAssignment, res.Assignment = true, toList(m.assigned)
	}
	return res, out
}

// checkConsumerHeartbeat refuses what Kafka refuses with INVALID_REQUEST
// and UNSUPPORTED_ASSIGNOR, before anything is looked up.
func (c *Coordinator) checkConsumerHeartbeat(req ConsumerHeartbeatRequest) error {
	invalid := func(msg string) error { return fmt.Errorf("%w: %s", ErrInvalidRequest, msg) }
	switch {
	case req.Group == "":
		return invalid("GroupId can't be empty") // Kafka: INVALID_REQUEST, not INVALID_GROUP_ID
	case req.InstanceID != nil && *req.InstanceID == "":
		return invalid("InstanceId can't be empty")
	case req.RackID != nil && *req.RackID == "":
		return invalid("RackId can't be empty")
	case req.MemberEpoch < StaticLeaveEpoch:
		return invalid(fmt.Sprintf("MemberEpoch %d is invalid", req.MemberEpoch))
	case req.MemberID == "" && (req.MemberEpoch != JoinEpoch || req.MemberIDRequired):
		return invalid("MemberId can't be empty")
	case len(req.MemberID) > 255:
		return invalid("MemberId is longer than 255 characters")
	case req.MemberEpoch == StaticLeaveEpoch && req.InstanceID == nil:
		return invalid("InstanceId can't be null when MemberEpoch is -2")
	}
	if req.MemberEpoch == JoinEpoch {
		switch {
		case req.RebalanceTimeout < 0:
			return invalid("RebalanceTimeoutMs must be provided in first request")
		case len(req.Owned) > 0:
			return invalid("TopicPartitions must be empty when (re-)joining")
		case req.Topics == nil && req.Regex == nil:
			return invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request")
		}
	}
	if req.Regex != nil && *req.Regex != "" {
		if _, err := regexp.Compile(*req.Regex); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidRegex, err)
		}
	}
	if req.Assignor != nil && !slices.Contains(c.cfg.Consumer.Assignors, *req.Assignor) {
		return fmt.Errorf("%w: %q (this broker has %v)", ErrUnsupportedAssignor, *req.Assignor, c.cfg.Consumer.Assignors)
	}
	for _, tp := range req.Owned {
		for _, p := range tp.Partitions {
			if p < 0 {
				return invalid(fmt.Sprintf("partition %d of an owned topic is negative", p))
			}
		}
	}
	return nil
}

// consumerMember finds (or, on a join, creates) the member a heartbeat is
// from and checks its epoch: a member ahead of the coordinator, or behind
// it other than by the one step of a lost answer, is fenced.
func (c *Coordinator) consumerMember(g *group, now time.Time, req ConsumerHeartbeatRequest) (*cmember, bool, error) {
	cg := g.cg
	inst := ""
	if req.InstanceID != nil {
		inst = *req.InstanceID
	}
	if req.MemberEpoch == JoinEpoch {
		if inst != "" {
			if oldID, ok := cg.static[inst]; ok && oldID != req.MemberID {
				old := cg.members[oldID]
				if old.epoch != StaticLeaveEpoch {
					return nil, false, fmt.Errorf("%w: instance %s is still held by member %s", ErrUnreleasedInstanceID, inst, oldID)
				}
				return c.replaceConsumerStatic(cg, req, old), false, nil
			}
		}
		if m := cg.members[req.MemberID]; m != nil && req.MemberID != "" {
			if m.instanceID != inst {
				return nil, false, fmt.Errorf("%w: member %s has instance id %q", ErrFencedInstanceID, m.id, m.instanceID)
			}
			if m.epoch == StaticLeaveEpoch {
				m.epoch = m.prevEpoch // a static member back under its own id
			}
			return m, false, nil // rejoining after a fence: it keeps what it has
		}
		if c.cfg.MaxGroupSize > 0 && len(cg.members) >= c.cfg.MaxGroupSize {
			return nil, false, fmt.Errorf("%w: %d members", ErrGroupMaxSize, len(cg.members))
		}
		id := req.MemberID
		if id == "" {
			id = c.newMemberID(req.ClientID)
		}
		cg.seq++
		m := &cmember{id: id, instanceID: inst, assigned: map[topicPartition]int32{}, seq: cg.seq, lastSeen: now}
		cg.members[id] = m
		if inst != "" {
			cg.static[inst] = id
		}
		return m, true, nil
	}
	m := cg.members[req.MemberID]
	if m == nil {
		return nil, false, fmt.Errorf("%w: member %s is not in group %s", ErrUnknownMember, req.MemberID, g.id)
	}
	if inst != "" && m.instanceID != inst {
		return nil, false, fmt.Errorf("%w: member %s has instance id %q", ErrFencedInstanceID, m.id, m.instanceID)
	}
	if err := checkMemberEpoch(m, req); err != nil {
		return nil, false, err
	}
	return m, false, nil
}

// checkMemberEpoch is Kafka's fence. One step behind is allowed when the
// member's owned partitions show it only missed the answer that moved it.
func checkMemberEpoch(m *cmember, req ConsumerHeartbeatRequest) error {
	switch {
	case m.epoch == StaticLeaveEpoch:
		// It left (for now): only a join (epoch 0) brings it back.
	case req.MemberEpoch == m.epoch:
		return nil
	case req.MemberEpoch < m.epoch && req.MemberEpoch == m.prevEpoch && req.Owned != nil && ownedSubset(req.Owned, m.assigned):
		return nil
	}
	return fmt.Errorf("%w: member %s sent epoch %d, the coordinator has %d", ErrFencedMemberEpoch, m.id, req.MemberEpoch, m.epoch)
}

func ownedSubset(owned []TopicPartitions, assigned map[topicPartition]int32) bool {
	for tp := range fromList(owned) {
		if _, ok := assigned[tp]; !ok {
			return false
		}
	}
	return true
}

// replaceConsumerStatic gives a static member that left with epoch -2 a new
// member id: the newcomer inherits its partitions, target and epoch, so a
// restarted instance gets its partitions back without a rebalance.
func (c *Coordinator) replaceConsumerStatic(cg *consumerGroup, req ConsumerHeartbeatRequest, old *cmember) *cmember {
	id := req.MemberID
	if id == "" {
		id = c.newMemberID(req.ClientID)
	}
	m := *old
	m.id, m.epoch = id, old.prevEpoch
	delete(cg.members, old.id)
	cg.members[id] = &m
	cg.static[m.instanceID] = id
	if t, ok := cg.target[old.id]; ok {
		delete(cg.target, old.id)
		cg.target[id] = t
	}
	for tp, o := range cg.owner {
		if o == old.id {
			cg.owner[tp] = id
		}
	}
	return &m
}

// updateSubscription applies the fields a heartbeat set and reports
// whether the assignment depends on what changed.
func (c *Coordinator) updateSubscription(m *cmember, req ConsumerHeartbeatRequest) bool {
	changed := false
	if req.Topics != nil {
		ts := slices.Clone(req.Topics)
		slices.Sort(ts)
		ts = slices.Compact(ts)
		if !slices.Equal(ts, m.topics) {
			m.topics, changed = ts, true
		}
	}
	if req.Regex != nil && *req.Regex != m.regex {
		m.regex, m.re, changed = *req.Regex, nil, true
		if m.regex != "" {
			// Kafka (RE2/J) matches the whole topic name; validated above.
			m.re = regexp.MustCompile("^(?:" + m.regex + ")$")
		}
	}
	if req.Assignor != nil && *req.Assignor != m.assignor {
		m.assignor, changed = *req.Assignor, true
	}
	if req.RackID != nil {
		m.rackID = *req.RackID
	}
	if req.RebalanceTimeout >= 0 {
		m.rebalanceTimeout = req.RebalanceTimeout
	}
	return changed
}

// consumerLeave handles epochs -1 (leave) and -2 (a static member leaves
// for now: it keeps its partitions until its session times out).
func (c *Coordinator) consumerLeave(g *group, req ConsumerHeartbeatRequest, res ConsumerHeartbeatResult) (ConsumerHeartbeatResult, Output) {
	cg := g.cg
	var out Output
	m := cg.members[req.MemberID]
	if req.InstanceID != nil {
		id, ok := cg.static[*req.InstanceID]
		switch {
		case !ok:
			res.Err = fmt.Errorf("%w: no member has instance id %s", ErrUnknownMember, *req.InstanceID)
			return res, out
		case id != req.MemberID:
			res.Err = fmt.Errorf("%w: instance %s is held by member %s", ErrFencedInstanceID, *req.InstanceID, id)
			return res, out
		}
	}
	if m == nil {
		res.Err = fmt.Errorf("%w: member %s is not in group %s", ErrUnknownMember, req.MemberID, g.id)
		return res, out
	}
	if req.MemberEpoch == StaticLeaveEpoch {
		if m.epoch != StaticLeaveEpoch {
			m.prevEpoch, m.epoch = m.epoch, StaticLeaveEpoch
		}
		return res, out
	}
	out.Removed = append(out.Removed, cg.remove(g, m, RemovedLeft))
	return res, out
}
