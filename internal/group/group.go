package group

import (
	"cmp"
	"slices"
	"time"
)

// member is one joined member. Membership lives only in memory unless
// Config.DurableMembership (membership.go): then after a restart every
// group comes back Empty and Kafka clients, told ErrUnknownMember, rejoin.
type member struct {
	id, instanceID       string
	clientID, clientHost string
	protocols            []Protocol
	topics               []string
	sessionTimeout       time.Duration
	rebalanceTimeout     time.Duration
	lastSeen             time.Time // session deadline = lastSeen + sessionTimeout
	seq                  uint64    // join order: leader choice and stable output order
	joinTicket           Ticket    // 0 unless a join is waiting
	syncTicket           Ticket    // 0 unless a sync is waiting
	assignment           []byte
	partitions           []TopicPartitions
}

func (m *member) metadataFor(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

func (m *member) supports(name string) bool {
	return slices.ContainsFunc(m.protocols, func(p Protocol) bool { return p.Name == name })
}

func (m *member) sameProtocols(ps []Protocol) bool {
	return slices.EqualFunc(m.protocols, ps, func(a, b Protocol) bool {
		return a.Name == b.Name && string(a.Metadata) == string(b.Metadata)
	})
}

// expired reports whether the member's session ran out. A member with a
// join or sync waiting is alive: it is blocked on us, not gone.
func (m *member) expired(now time.Time) bool {
	if m.joinTicket != 0 || m.syncTicket != 0 {
		return false
	}
	return !now.Before(m.lastSeen.Add(m.sessionTimeout))
}

// group is one consumer group: members, generation and committed offsets.
type group struct {
	id           string
	state        State
	mode         AssignMode
	generation   int32
	protocolType string
	protocol     string
	leader       string
	members      map[string]*member
	static       map[string]string    // instance id -> member id
	pending      map[string]time.Time // member ids handed out (v4+), deadline to use them
	// rebalanceDeadline ends PreparingRebalance even if members are
	// missing, and CompletingRebalance if some never sync (a leader that
	// heartbeats but never assigns must not stall its followers forever);
	// joinNotBefore holds an initial rebalance open.
	rebalanceDeadline time.Time
	joinNotBefore     time.Time
	seq               uint64
	offsets           map[topicPartition]Committed
	// offsetsShared: a snapshot captured offsets (snapshot.go); the next change clones
	// the map first.
	offsetsShared bool
	// cg is set while the group is a KIP-848 consumer group: then the
	// classic fields above stay empty (a group is one type at a time).
	cg *consumerGroup
	// storing: the group's Stable record is on its way to disk
	// (Config.DurableMembership); it stays CompletingRebalance, its joins
	// and syncs waiting, until Stored. recorded is what its last record
	// (written or replayed) held. See membership.go.
	storing    bool
	recorded   recordState
	recordedCG *consumerRecorded // what a consumer group's records hold (consumer_record.go)
}

// busy reports whether the group has members of either type.
func (g *group) busy() bool {
	return g.state != Empty || len(g.pending) > 0 || (g.cg != nil && len(g.cg.members) > 0)
}

type topicPartition struct {
	topic     string
	partition int32
}

func newGroup(id string) *group {
	return &group{
		id: id, members: make(map[string]*member), static: make(map[string]string),
		pending: make(map[string]time.Time), offsets: make(map[topicPartition]Committed),
	}
}

func (g *group) sortedMembers() []*member {
	ms := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *member) int { return cmp.Compare(a.seq, b.seq) })
	return ms
}

func (g *group) subscribes(topic string) bool {
	for _, m := range g.members {
		if slices.Contains(m.topics, topic) {
			return true
		}
	}
	return false
}

// allJoined reports whether PreparingRebalance can end: every member has a
// join waiting and no handed-out member id is still unused.
func (g *group) allJoined() bool {
	if len(g.pending) > 0 {
		return false
	}
	for _, m := range g.members {
		if m.joinTicket == 0 {
			return false
		}
	}
	return true
}

// fits reports whether a member with these protocols may join: Kafka
// requires a protocol type and at least one protocol that every current
// member also supports.
func (g *group) fits(req JoinRequest) bool {
	if req.ProtocolType == "" || len(req.Protocols) == 0 {
		return false
	}
	if len(g.members) == 0 {
		return true
	}
	if req.ProtocolType != g.protocolType || req.Mode != g.mode {
		return false
	}
	for _, p := range req.Protocols {
		if g.allSupport(p.Name, req.MemberID) {
			return true
		}
	}
	return false
}

// allSupport reports whether every member but except supports name.
func (g *group) allSupport(name, except string) bool {
	for id, m := range g.members {
		if id != except && !m.supports(name) {
			return false
		}
	}
	return true
}

// selectProtocol picks the protocol every member supports that most
// members list first among those candidates (Kafka's vote); ties go to
// the earliest-joined member's preference, so the choice is deterministic.
func (g *group) selectProtocol() string {
	ms := g.sortedMembers()
	if len(ms) == 0 {
		return ""
	}
	var candidates []string
	for _, p := range ms[0].protocols {
		if g.allSupport(p.Name, "") {
			candidates = append(candidates, p.Name)
		}
	}
	votes := make(map[string]int)
	for _, m := range ms {
		for _, p := range m.protocols {
			if slices.Contains(candidates, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := ""
	for _, name := range candidates {
		if best == "" || votes[name] > votes[best] {
			best = name
		}
	}
	return best
}

// nextDeadline is the earliest time Tick must look at this group.
func (g *group) nextDeadline(c *Coordinator) (time.Time, bool) {
	var best time.Time
	consider := func(t time.Time) {
		if !t.IsZero() && (best.IsZero() || t.Before(best)) {
			best = t
		}
	}
	for _, d := range g.pending {
		consider(d)
	}
	for _, m := range g.members {
		if m.joinTicket == 0 && m.syncTicket == 0 {
			consider(m.lastSeen.Add(m.sessionTimeout))
		}
	}
	if g.state == PreparingRebalance || g.state == CompletingRebalance {
		consider(g.rebalanceDeadline)
	}
	if g.state == PreparingRebalance {
		if g.allJoined() {
			consider(g.joinNotBefore)
		}
	}
	if g.cg != nil {
		consider(c.nextConsumerDeadline(g.cg))
	}
	return best, !best.IsZero()
}

// setState changes g's state and reports the change.
func (g *group) setState(to State, out *Output) {
	if g.state == to {
		return
	}
	out.Transitions = append(out.Transitions, Transition{Group: g.id, From: g.state, To: to, Generation: g.generation})
	g.state = to
}
