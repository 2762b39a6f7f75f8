package group

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config bounds what members may ask for. The zero value is usable: zero
// fields take the defaults below, which are Kafka's.
type Config struct {
	MinSessionTimeout time.Duration // default 6s
	MaxSessionTimeout time.Duration // default 30m
	// InitialRebalanceDelay holds the first rebalance of an Empty group
	// open this long so members starting together form one generation
	// instead of several (Kafka's group.initial.rebalance.delay.ms, 3s
	// there; default 0 here so tests and the native API are not slowed).
	InitialRebalanceDelay time.Duration
	MaxGroupSize          int // 0: unlimited
	MaxMetadataSize       int // commit metadata bytes; default 4096
	// Incarnation is put in every generated member id so ids handed out
	// before a broker restart can never be handed out again after it; the
	// broker passes something unique per start (random or a start time).
	Incarnation string
	// Consumer configures KIP-848 consumer groups.
	Consumer ConsumerConfig
	// DurableMembership returns classic groups' membership as
	// EventGroupMembers records and makes a group Stable only once its
	// record is Stored (membership.go). A cluster sets it, so a new
	// coordinator keeps the members; a single node does not (its members
	// rejoin after a restart, which costs a rebalance and no writes).
	DurableMembership bool
}

func (c Config) withDefaults() Config {
	if c.MinSessionTimeout == 0 {
		c.MinSessionTimeout = 6 * time.Second
	}
	if c.MaxSessionTimeout == 0 {
		c.MaxSessionTimeout = 30 * time.Minute
	}
	if c.MaxMetadataSize == 0 {
		c.MaxMetadataSize = 4096
	}
	c.Consumer = c.Consumer.withDefaults()
	return c
}

// Coordinator holds every group of one broker. It is not safe for
// concurrent use: the broker serializes calls (one mutex or goroutine).
type Coordinator struct {
	cfg        Config
	groups     map[string]*group
	partitions map[string]int32 // topic -> partition count, fed by SetPartitions
	nextID     uint64           // member id counter
	nextTicket Ticket
}

// New returns a coordinator with no groups.
func New(cfg Config) *Coordinator {
	return &Coordinator{
		cfg:        cfg.withDefaults(),
		groups:     make(map[string]*group),
		partitions: make(map[string]int32),
	}
}

// Forget removes every group with its offsets, members and records: a cluster node about
// to take a complete copy of the groups from a snapshot of the metadata group. The
// partition counts and the member-id counter stay, so no member id is handed out twice.
func (c *Coordinator) Forget() { clear(c.groups) }

func (c *Coordinator) ticket() Ticket {
	c.nextTicket++
	return c.nextTicket
}

func (c *Coordinator) newMemberID(clientID string) string {
	c.nextID++
	if clientID == "" {
		clientID = "member"
	}
	id := clientID + "-"
	if c.cfg.Incarnation != "" {
		id += c.cfg.Incarnation + "-"
	}
	return id + strconv.FormatUint(c.nextID, 10)
}

// getOrCreate returns the group, creating it Empty if needed.
func (c *Coordinator) getOrCreate(id string) *group {
	g := c.groups[id]
	if g == nil {
		g = newGroup(id)
		c.groups[id] = g
	}
	return g
}

// GroupSummary is one row of List.
type GroupSummary struct {
	Group        string
	State        State
	Mode         AssignMode
	ProtocolType string
	Members      int
	// Type is TypeClassic or TypeConsumer (KIP-848).
	Type string
}

// List returns every group, sorted by id. Groups that only hold committed
// offsets are listed Empty with no protocol type, as Kafka does.
func (c *Coordinator) List() []GroupSummary {
	out := make([]GroupSummary, 0, len(c.groups))
	for _, g := range c.groups {
		sum := GroupSummary{Group: g.id, State: g.state, Mode: g.mode, ProtocolType: g.protocolType, Members: len(g.members), Type: TypeClassic}
		if g.cg != nil {
			sum.Type, sum.State, sum.ProtocolType, sum.Members = TypeConsumer, g.cg.state(), TypeConsumer, len(g.cg.members)
		}
		out = append(out, sum)
	}
	slices.SortFunc(out, func(a, b GroupSummary) int { return cmp.Compare(a.Group, b.Group) })
	return out
}

// MemberInfo describes one member.
type MemberInfo struct {
	MemberID   string
	InstanceID string
	ClientID   string
	ClientHost string
	Metadata   []byte // for the selected protocol
	Assignment []byte // LeaderAssigns: what the leader sent
	Partitions []TopicPartitions
	// LastSeen is the member's last heartbeat, commit, join or sync.
	LastSeen time.Time
	// Consumer groups (KIP-848) only: Partitions is what the member may
	// use now, Target what it is moving to, Revoking what it must release.
	MemberEpoch      int32
	MemberState      string // "stable", "unrevoked", "unreleased"
	RackID           string
	SubscribedTopics []string
	SubscribedRegex  string
	Target           []TopicPartitions
	Revoking         []TopicPartitions
}

// GroupInfo describes a group.
type GroupInfo struct {
	Group        string
	State        State
	Mode         AssignMode
	Generation   int32
	ProtocolType string
	Protocol     string
	Leader       string
	Members      []MemberInfo
	// Type is TypeClassic or TypeConsumer; for a consumer group Epoch is
	// the group epoch, AssignmentEpoch the target's and Assignor the
	// server assignor that computed it.
	Type            string
	Epoch           int32
	AssignmentEpoch int32
	Assignor        string
}

// Describe returns the group; an unknown group comes back as State Dead
// with ok false, which is how Kafka's DescribeGroups answers.
func (c *Coordinator) Describe(id string) (info GroupInfo, ok bool) {
	g := c.groups[id]
	if g == nil {
		return GroupInfo{Group: id, State: Dead}, false
	}
	if g.cg != nil {
		return g.describeConsumer(), true
	}
	info = GroupInfo{Type: TypeClassic,
		Group: g.id, State: g.state, Mode: g.mode, Generation: g.generation,
		ProtocolType: g.protocolType, Protocol: g.protocol, Leader: g.leader,
	}
	for _, m := range g.sortedMembers() {
		info.Members = append(info.Members, MemberInfo{
			MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID,
			ClientHost: m.clientHost, Metadata: m.metadataFor(g.protocol),
			Assignment: m.assignment, Partitions: g.shownPartitions(m), LastSeen: m.lastSeen,
		})
	}
	return info, true
}

// shownPartitions is what m was assigned, for describing the group: the coordinator's own
// assignment, or in a Kafka consumer group ("consumer" protocol type) the partitions the
// leader's opaque assignment names, read as Kafka's ConsumerProtocolAssignment — what
// kafka-consumer-groups.sh --describe shows. Any other protocol type's (Connect, Streams'
// own), or one that does not read, shows none.
func (g *group) shownPartitions(m *member) []TopicPartitions {
	if m.partitions != nil || g.protocolType != "consumer" || len(m.assignment) == 0 {
		return m.partitions
	}
	var a kmsg.ConsumerMemberAssignment
	if a.ReadFrom(m.assignment) != nil {
		return nil
	}
	var out []TopicPartitions
	for _, t := range a.Topics {
		out = append(out, TopicPartitions{Topic: t.Topic, Partitions: slices.Clone(t.Partitions)})
	}
	return out
}

// Delete removes an Empty group and its committed offsets.
func (c *Coordinator) Delete(id string) (Output, error) {
	g := c.groups[id]
	switch {
	case id == "":
		return Output{}, ErrInvalidGroupID
	case g == nil:
		return Output{}, ErrGroupNotFound
	case g.busy():
		return Output{}, ErrGroupNotEmpty
	}
	delete(c.groups, id)
	return Output{Events: []Event{{Type: EventGroupDeleted, Group: id}}}, nil
}

// NextDeadline returns the earliest time at which Tick has something to
// do, so the broker can arm one timer instead of polling.
func (c *Coordinator) NextDeadline() (time.Time, bool) {
	var best time.Time
	for _, g := range c.groups {
		if d, ok := g.nextDeadline(c); ok && (best.IsZero() || d.Before(best)) {
			best = d
		}
	}
	return best, !best.IsZero()
}

// Tick expires members whose session ran out and ends rebalances whose
// time is up, as of now.
func (c *Coordinator) Tick(now time.Time) Output {
	var out Output
	for _, id := range sortedKeys(c.groups) {
		g := c.groups[id]
		gout := c.tickGroup(g, now)
		if g.cg != nil {
			gout.merge(c.tickConsumer(g, now))
		}
		if len(gout.Removed)+len(gout.Transitions) > 0 {
			// Time changes membership only by removing members or ending a
			// rebalance: a tick that did neither has nothing to record.
			c.noteMembership(g, &gout)
		}
		out.merge(gout)
		if !g.busy() && len(g.offsets) == 0 {
			// Nothing durable and nobody waiting: forget it, as Kafka
			// drops empty groups without offsets, so abandoned first
			// joins do not pile up.
			delete(c.groups, id)
		}
	}
	return out
}

// SetPartitions records a topic's partition count (0 when the topic is
// deleted, which also deletes every group's offsets for it). Groups
// subscribed to the topic rebalance when it changes, so new partitions
// get an owner and removed ones lose theirs. The count is
// trusted: the broker has validated it when the topic was created, and
// BrokerAssigns assignment is linear in it.
func (c *Coordinator) SetPartitions(now time.Time, topic string, n int32) Output {
	old := c.partitions[topic]
	if n <= 0 {
		delete(c.partitions, topic)
		n = 0
	} else {
		c.partitions[topic] = n
	}
	var out Output
	if n == 0 {
		// Even when the count was unknown (after a restart the broker
		// may not have told us yet), a deleted topic's offsets go.
		out.merge(c.forgetTopic(now, topic))
	}
	if old == n {
		return out
	}
	for _, id := range sortedKeys(c.groups) {
		g := c.groups[id]
		if (g.state == Stable || g.state == CompletingRebalance) && g.subscribes(topic) {
			out.merge(c.prepareRebalance(g, now))
		}
		if g.cg != nil && g.cg.subscribesTopic(topic) {
			g.cg.epoch++ // the next heartbeat computes a target with the new partitions
		}
	}
	c.noteAllMemberships(&out)
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
