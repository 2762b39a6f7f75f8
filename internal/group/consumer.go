package group

// KIP-848 consumer groups: state.
//
// A consumer group has a group epoch, bumped whenever what the assignment
// depends on changes (a member joins or leaves, a subscription changes, a
// subscribed topic gains partitions); a target assignment, computed by
// the server assignor for the group epoch it was computed at (the
// assignment epoch); and members, each with a member epoch and the
// partitions it may use now. A member moves towards its target one
// heartbeat at a time (reconcile.go): partitions it must give up are
// revoked first, and the member keeps its epoch until a heartbeat reports
// them released; only then does it take the new epoch and the partitions
// of its target that nobody else still holds. So a partition never has two
// owners, which owner tracks.

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"time"
)

type memberState uint8

const (
	memberStable     memberState = iota // at its target (or on its way, nothing to revoke)
	memberUnrevoked                     // must report revoking released before it moves on
	memberUnreleased                    // at the target epoch, waiting for partitions others hold
)

var memberStateNames = [...]string{"stable", "unrevoked", "unreleased"}

func (s memberState) String() string { return memberStateNames[s] }

type tpSet map[topicPartition]bool

// cmember is one member of a consumer group (soft state, like classic
// membership).
type cmember struct {
	id, instanceID, rackID string
	clientID, clientHost   string
	epoch, prevEpoch       int32
	state                  memberState
	// assigned: what the member may use now, each partition with the
	// member epoch it was given in (commits at an older epoch are checked
	// against it).
	assigned         map[topicPartition]int32
	revoking         tpSet // taken from it, not yet reported released
	topics           []string
	regex            string
	re               *regexp.Regexp
	assignor         string
	rebalanceTimeout time.Duration
	lastSeen         time.Time
	revokeDeadline   time.Time
	seq              uint64
}

type consumerGroup struct {
	epoch, assignmentEpoch int32
	assignor               string // of the current target
	members                map[string]*cmember
	static                 map[string]string // instance id -> member id
	target                 map[string]tpSet  // member id -> target partitions
	owner                  map[topicPartition]string
	seq                    uint64
}

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{
		members: map[string]*cmember{}, static: map[string]string{},
		target: map[string]tpSet{}, owner: map[topicPartition]string{},
	}
}

func (cg *consumerGroup) sortedMembers() []*cmember {
	ms := make([]*cmember, 0, len(cg.members))
	for _, m := range cg.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *cmember) int { return cmp.Compare(a.seq, b.seq) })
	return ms
}

// state is the group's KIP-848 state.
func (cg *consumerGroup) state() State {
	if len(cg.members) == 0 {
		return Empty
	}
	if cg.epoch > cg.assignmentEpoch {
		return Assigning
	}
	for _, m := range cg.members {
		if m.epoch != StaticLeaveEpoch && (m.epoch != cg.assignmentEpoch || m.state != memberStable) {
			return Reconciling
		}
	}
	return Stable
}

// subscribes reports whether m's subscription (names or regex) covers topic.
func (m *cmember) subscribes(topic string) bool {
	return slices.Contains(m.topics, topic) || (m.re != nil && m.re.MatchString(topic))
}

// resolvedTopics is m's subscription over the topics that exist now.
func (m *cmember) resolvedTopics(counts map[string]int32) []string {
	var out []string
	for t, n := range counts {
		if n > 0 && m.subscribes(t) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

// release frees the partitions m holds (assigned or revoking).
func (cg *consumerGroup) release(m *cmember, ps tpSet) {
	for tp := range ps {
		if cg.owner[tp] == m.id {
			delete(cg.owner, tp)
		}
	}
}

// remove drops m from the group and frees its partitions; the group epoch
// moves so the rest get a new target.
func (cg *consumerGroup) remove(g *group, m *cmember, why RemoveReason) Removal {
	for tp := range m.assigned {
		if cg.owner[tp] == m.id {
			delete(cg.owner, tp)
		}
	}
	cg.release(m, m.revoking)
	delete(cg.members, m.id)
	delete(cg.target, m.id)
	if m.instanceID != "" && cg.static[m.instanceID] == m.id {
		delete(cg.static, m.instanceID)
	}
	cg.epoch++
	return Removal{Group: g.id, MemberID: m.id, InstanceID: m.instanceID, Reason: why}
}

// toList turns a set of partitions into sorted TopicPartitions.
func toList[V any](ps map[topicPartition]V) []TopicPartitions {
	by := map[string][]int32{}
	for tp := range ps {
		by[tp.topic] = append(by[tp.topic], tp.partition)
	}
	out := make([]TopicPartitions, 0, len(by))
	for _, t := range sortedKeys(by) {
		p := by[t]
		slices.Sort(p)
		out = append(out, TopicPartitions{Topic: t, Partitions: p})
	}
	return out
}

func fromList(tps []TopicPartitions) tpSet {
	s := tpSet{}
	for _, tp := range tps {
		for _, p := range tp.Partitions {
			s[topicPartition{tp.Topic, p}] = true
		}
	}
	return s
}

func sameKeys[A, B any](a map[topicPartition]A, b map[topicPartition]B) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

// tickConsumer fences members whose session ran out, and members that kept
// revoked partitions past their rebalance timeout.
func (c *Coordinator) tickConsumer(g *group, now time.Time) Output {
	var out Output
	cg := g.cg
	for _, m := range cg.sortedMembers() {
		switch {
		case !now.Before(m.lastSeen.Add(c.cfg.Consumer.SessionTimeout)):
			out.Removed = append(out.Removed, cg.remove(g, m, RemovedSessionExpired))
		case m.state == memberUnrevoked && !now.Before(m.revokeDeadline):
			out.Removed = append(out.Removed, cg.remove(g, m, RemovedNotRevoked))
		}
	}
	return out
}

// nextConsumerDeadline is the earliest time tickConsumer has work.
func (c *Coordinator) nextConsumerDeadline(cg *consumerGroup) time.Time {
	var best time.Time
	for _, m := range cg.members {
		d := m.lastSeen.Add(c.cfg.Consumer.SessionTimeout)
		if m.state == memberUnrevoked && m.revokeDeadline.Before(d) {
			d = m.revokeDeadline
		}
		if best.IsZero() || d.Before(best) {
			best = d
		}
	}
	return best
}

// subscribesTopic reports whether any member's subscription covers topic.
func (cg *consumerGroup) subscribesTopic(topic string) bool {
	for _, m := range cg.members {
		if m.subscribes(topic) {
			return true
		}
	}
	return false
}

// checkConsumerCommitter is Kafka's commit fence for consumer groups: the
// member epoch in place of the generation. Epoch -1 (no member id) is a
// commit from outside the group, allowed while it has no members. A
// commit at the member's current epoch is accepted; at an older one,
// partition by partition (checkCommitEpoch). It returns the member (nil
// for an outside commit).
func checkConsumerCommitter(g *group, req CommitRequest) (*cmember, error) {
	cg := g.cg
	if req.Generation < 0 && len(cg.members) == 0 {
		return nil, nil
	}
	m := cg.members[req.MemberID]
	if m == nil {
		return nil, fmt.Errorf("%w: member %q is not in consumer group %s", ErrUnknownMember, req.MemberID, g.id)
	}
	if req.Classic {
		return nil, fmt.Errorf("%w: members of consumer group %s commit with OffsetCommit v9 or later", ErrUnsupportedVersion, g.id)
	}
	if req.Generation > m.epoch || req.Generation < 0 {
		return nil, fmt.Errorf("%w: member %s committed at epoch %d, its epoch is %d", ErrStaleMemberEpoch, m.id, req.Generation, m.epoch)
	}
	return m, nil
}

// checkCommitEpoch accepts a commit at an epoch older than the member's
// only for a partition the member has held since that epoch or earlier
// (KIP-1251): an auto-commit sent just before the member moved to a new
// epoch is still the owner's; a partition it got after that epoch, or no
// longer holds, is refused.
func (m *cmember) checkCommitEpoch(epoch int32, o OffsetCommit) error {
	if m == nil || epoch == m.epoch {
		return nil
	}
	tp := topicPartition{o.Topic, o.Partition}
	if since, ok := m.assigned[tp]; ok && since <= epoch {
		return nil
	}
	if m.revoking[tp] {
		return nil // still its own until it reports it released
	}
	return fmt.Errorf("%w: %s/%d was not member %s's at epoch %d", ErrStaleMemberEpoch, o.Topic, o.Partition, m.id, epoch)
}

// CheckFetch is the fence of OffsetFetch v9+, which names a member and its
// epoch: epoch -1 (or a classic group) reads freely; otherwise the member
// must be in the consumer group at that epoch.
func (c *Coordinator) CheckFetch(groupID, memberID string, epoch int32) error {
	g := c.groups[groupID]
	if epoch == LeaveEpoch || memberID == "" && epoch < 0 || g == nil || g.cg == nil {
		return nil
	}
	m := g.cg.members[memberID]
	switch {
	case m == nil:
		return fmt.Errorf("%w: member %q is not in consumer group %s", ErrUnknownMember, memberID, groupID)
	case m.epoch != epoch:
		return fmt.Errorf("%w: member %s fetched at epoch %d, its epoch is %d", ErrStaleMemberEpoch, memberID, epoch, m.epoch)
	}
	return nil
}

func (g *group) describeConsumer() GroupInfo {
	cg := g.cg
	info := GroupInfo{
		Group: g.id, State: cg.state(), Type: TypeConsumer, ProtocolType: TypeConsumer,
		Epoch: cg.epoch, AssignmentEpoch: cg.assignmentEpoch, Assignor: cg.assignor, Generation: cg.epoch,
	}
	for _, m := range cg.sortedMembers() {
		info.Members = append(info.Members, MemberInfo{
			MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost,
			Partitions: toList(m.assigned), LastSeen: m.lastSeen, MemberEpoch: m.epoch,
			MemberState: m.state.String(), RackID: m.rackID, SubscribedTopics: m.topics,
			SubscribedRegex: m.regex, Target: toList(cg.target[m.id]), Revoking: toList(m.revoking),
		})
	}
	return info
}
