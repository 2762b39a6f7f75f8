package broker

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Share groups (KIP-932): Kafka's queues. A share group reading a topic
// *is* the topic's subscription named after the group (topic/group), so
// the native API, SQS and a share group see one cursor: records acquired,
// acknowledged, released, timed out and dead-lettered through any of them
// are the same records. Membership and share sessions live in memory, as
// classic membership does (a restart makes members join again and open new
// sessions; records they held come back when their lock runs out); what a
// member acknowledged is in the subscription's journal, so it is never
// delivered again. Group configs are in share-groups.json.
//
// Every member is assigned every partition of the topics it subscribes to:
// a share-partition is read by any number of members, the cursor hands each
// record to one of them.
//
// In a cluster (cluster_share.go) members live on the group coordinator, share sessions on
// each partition's leader, and acquisitions and acknowledgements are the replicated
// cursor's operations (cluster_subs_recv.go).

// Errors of share groups, mapped to Kafka's codes by internal/kafka.
var (
	ErrShareSessionNotFound = errors.New("share session not found")
	ErrShareSessionEpoch    = errors.New("invalid share session epoch")
	ErrShareRecordState     = errors.New("record is not acquired by this member")
)

type shareGroups struct {
	b  *Broker
	mu sync.Mutex // guards groups and configs; a group's members have the group's lock
	// configs are the groups' configs, as stored (share_config.go).
	configs map[string]ShareConfig
	groups  map[string]*shareGroup
	// sessions are, in a cluster, the share sessions this node keeps as the leader of
	// their partitions, by member (cluster_share.go); on a single node a member's session
	// is its shareMember's.
	sessions map[ShareMember]*clusterSession
	// term is, in a cluster, the coordinator term groups' members joined in: a node that
	// coordinates again in a later term forgets them (shareCoordinator).
	term uint64
}

// shareGroup is one group's members. mu is held across a fetch's or an
// acknowledgement's cursor work (not across its long-poll), so one group's
// requests are serialised; groups are independent.
type shareGroup struct {
	id      string
	mu      sync.Mutex
	epoch   int32
	members map[string]*shareMember
}

type shareMember struct {
	id, clientID, host, rack string
	epoch                    int32
	topics                   []string // sorted
	deadline                 time.Time
	sent                     string // the assignment last answered, rendered
	session                  *shareSession
}

// shares returns the broker's share groups, loading the configs once.
func (b *Broker) shares() *shareGroups {
	b.shareOnce.Do(func() {
		sg := &shareGroups{b: b, configs: map[string]ShareConfig{}, groups: map[string]*shareGroup{},
			sessions: map[ShareMember]*clusterSession{}}
		if err := sg.load(); err != nil {
			b.log.Error("share group configs unreadable; using the defaults", "err", err)
		}
		b.share = sg
	})
	return b.share
}

// group returns a group, created if create.
func (sg *shareGroups) group(id string, create bool) *shareGroup {
	sg.mu.Lock()
	defer sg.mu.Unlock()
	g := sg.groups[id]
	if g == nil && create {
		g = &shareGroup{id: id, members: map[string]*shareMember{}}
		sg.groups[id] = g
	}
	return g
}

// lockCurrent returns a group locked, created if create, nil if there is
// none. The group is still the one of its id when it is returned: a
// memberless group may be dropped from groups (DeleteShareGroup, an admin
// call's release) while a caller waits for its lock, and a member must
// never join a group nobody can find again.
func (sg *shareGroups) lockCurrent(id string, create bool) *shareGroup {
	for {
		g := sg.group(id, create)
		if g == nil {
			return nil
		}
		g.mu.Lock()
		sg.mu.Lock()
		current := sg.groups[id] == g
		sg.mu.Unlock()
		if current {
			return g
		}
		g.mu.Unlock()
	}
}

// ShareHeartbeatRequest is a ShareGroupHeartbeat's content.
type ShareHeartbeatRequest struct {
	Group, MemberID string
	MemberEpoch     int32    // 0 joins, -1 leaves
	Topics          []string // nil: unchanged
	Rack            string
	ClientID, Host  string
}

// ShareHeartbeatResult is its answer; Assignment is set when it changed.
type ShareHeartbeatResult struct {
	MemberEpoch       int32
	HeartbeatInterval time.Duration
	HasAssignment     bool
	Assignment        []TopicPartitions
	Err               error
}

// ShareGroupHeartbeat joins, heartbeats or leaves a share group member. In a cluster only
// the group coordinator (the controller) serves it; another node answers
// NotCoordinatorError.
func (b *Broker) ShareGroupHeartbeat(ctx context.Context, req ShareHeartbeatRequest) ShareHeartbeatResult {
	if err := b.shareCoordinator(ctx); err != nil {
		return ShareHeartbeatResult{Err: err}
	}
	if !subNameRE.MatchString(req.Group) {
		return ShareHeartbeatResult{Err: fmt.Errorf("%w: a share group id is a subscription name: 1-120 letters, digits, '.', '_' or '-'", ErrInvalidGroupID)}
	}
	if req.MemberID == "" || len(req.MemberID) > 255 {
		return ShareHeartbeatResult{Err: invalid("member_id", "a share group member names itself (1-255 bytes)")}
	}
	sg := b.shares()
	cfg := b.ShareGroupConfig(req.Group)
	g := sg.lockCurrent(req.Group, req.MemberEpoch == 0)
	if g == nil {
		return ShareHeartbeatResult{Err: ErrUnknownMember}
	}
	defer g.mu.Unlock()
	now := b.now()
	b.expireMembersLocked(g, now)
	m := g.members[req.MemberID]
	switch {
	case req.MemberEpoch == -1:
		if m != nil {
			b.removeMemberLocked(g, m, "left")
		}
		return ShareHeartbeatResult{MemberEpoch: -1}
	case req.MemberEpoch == 0:
		if len(req.Topics) == 0 {
			return ShareHeartbeatResult{Err: invalid("subscribed_topic_names", "required when joining")}
		}
		if m == nil {
			m = &shareMember{id: req.MemberID}
			g.members[m.id] = m
		}
		m.sent = "" // a (re)join is answered with its assignment
	case m == nil:
		return ShareHeartbeatResult{Err: ErrUnknownMember}
	case req.MemberEpoch != m.epoch:
		return ShareHeartbeatResult{Err: ErrFencedMemberEpoch}
	}
	m.clientID, m.host, m.deadline = req.ClientID, req.Host, now.Add(cfg.SessionTimeout)
	if req.Rack != "" {
		m.rack = req.Rack
	}
	if req.Topics != nil {
		ts := append([]string(nil), req.Topics...)
		sort.Strings(ts)
		if fmt.Sprint(ts) != fmt.Sprint(m.topics) || m.epoch == 0 {
			m.topics = ts
			g.epoch++
			m.epoch = g.epoch
		}
	}
	res := ShareHeartbeatResult{MemberEpoch: m.epoch, HeartbeatInterval: cfg.HeartbeatInterval}
	a, err := b.shareAssignment(g.id, cfg, m.topics)
	if err != nil {
		return ShareHeartbeatResult{Err: err}
	}
	if key := fmt.Sprint(a); key != m.sent {
		m.sent, res.HasAssignment, res.Assignment = key, true, a
	}
	return res
}

// shareAssignment is every partition of each existing topic of topics,
// creating the group's subscription of each topic on first use (at the
// topic's end, or its start for share.auto.offset.reset=earliest).
func (b *Broker) shareAssignment(group string, cfg ShareConfig, topics []string) ([]TopicPartitions, error) {
	out := []TopicPartitions{}
	for _, name := range topics {
		t, err := b.streams.topic(name)
		if err != nil {
			continue // not there (yet): Kafka leaves it out too
		}
		if err := b.hasSubscription(name, group); errors.Is(err, ErrSubscriptionNotFound) {
			_, err = b.CreateSubscription(SubscriptionSettings{Topic: name, Name: group,
				FromEarliest: cfg.AutoOffsetReset == "earliest", VisibilityTimeout: cfg.LockDuration})
			if err != nil && !errors.Is(err, ErrSubscriptionExists) {
				return nil, err
			}
		}
		_, parts := t.snapshot()
		tp := TopicPartitions{Topic: name, Partitions: make([]int32, len(parts))}
		for i := range parts {
			tp.Partitions[i] = int32(i)
		}
		out = append(out, tp)
	}
	return out, nil
}

// expireMembersLocked removes members whose session timed out. Called with
// g.mu held.
func (b *Broker) expireMembersLocked(g *shareGroup, now time.Time) {
	for _, m := range g.members {
		if now.After(m.deadline) {
			b.removeMemberLocked(g, m, "session timed out")
		}
	}
}

// removeMemberLocked drops a member and releases what its session held.
// Called with g.mu held.
func (b *Broker) removeMemberLocked(g *shareGroup, m *shareMember, why string) {
	delete(g.members, m.id)
	g.epoch++
	if m.session != nil {
		b.releaseSession(g.id, m.session)
		m.session = nil
	}
	b.log.Info("share group member removed", "group", g.id, "member", m.id, "reason", why)
}

// ShareMemberInfo describes a member for ShareGroupDescribe.
type ShareMemberInfo struct {
	MemberID, ClientID, Host, Rack string
	Epoch                          int32
	Topics                         []string
	Assignment                     []TopicPartitions
}

// ShareGroupInfo describes a share group.
type ShareGroupInfo struct {
	Group   string
	Epoch   int32
	State   string // Empty or Stable
	Members []ShareMemberInfo
}

// DescribeShareGroup describes a group: ErrGroupNotFound if it has
// no members, no config and no subscription (share_list.go).
func (b *Broker) DescribeShareGroup(group string) (ShareGroupInfo, error) {
	if err := b.shareCoordinator(context.Background()); err != nil {
		return ShareGroupInfo{}, err
	}
	sg := b.shares()
	g := sg.group(group, false)
	if g == nil {
		if !b.shareGroupExists(group) {
			return ShareGroupInfo{}, ErrGroupNotFound
		}
		return ShareGroupInfo{Group: group, State: "Empty"}, nil
	}
	cfg := b.ShareGroupConfig(group)
	g.mu.Lock()
	defer g.mu.Unlock()
	b.expireMembersLocked(g, b.now())
	info := ShareGroupInfo{Group: group, Epoch: g.epoch, State: "Empty"}
	for _, m := range g.members {
		a, _ := b.shareAssignment(group, cfg, m.topics)
		info.Members = append(info.Members, ShareMemberInfo{MemberID: m.id, ClientID: m.clientID, Host: m.host,
			Rack: m.rack, Epoch: m.epoch, Topics: m.topics, Assignment: a})
	}
	sort.Slice(info.Members, func(i, j int) bool { return info.Members[i].MemberID < info.Members[j].MemberID })
	if len(info.Members) > 0 {
		info.State = "Stable"
	}
	return info, nil
}

// hasSubscription reports whether topic has a subscription named name: nil, or
// ErrSubscriptionNotFound (or why it could not tell). In a cluster it is the catalog's.
func (b *Broker) hasSubscription(topic, name string) error {
	if c := b.clusterTopic(topic); c != nil {
		_, err := c.subscription(topic, name)
		return err
	}
	_, _, err := b.subscription(topic, name)
	return err
}

// shareCoordinator returns nil if this node serves share group membership now: always on
// a single node; in a cluster the group coordinator (CheckCoordinator). A coordinator in
// a new term first forgets the members of an earlier one, as the consumer groups'
// coordinator does (cluster_groups.go): they heartbeated another coordinator meanwhile,
// or none; they get UNKNOWN_MEMBER_ID and join again.
func (b *Broker) shareCoordinator(ctx context.Context) error {
	if b.cluster == nil {
		return nil
	}
	if err := b.CheckCoordinator(ctx); err != nil {
		return err
	}
	term, _ := b.cluster.cat.Term()
	sg := b.shares()
	sg.mu.Lock()
	defer sg.mu.Unlock()
	if sg.term != term {
		sg.term = term
		sg.groups = map[string]*shareGroup{}
	}
	return nil
}
