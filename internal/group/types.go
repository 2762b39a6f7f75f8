package group

import "time"

// State is a group's place in the classic rebalance protocol.
type State uint8

const (
	// Empty: no members; offsets may still be stored. Simple (generation -1)
	// commits, offset resets and deletion are allowed only here.
	Empty State = iota
	// PreparingRebalance: waiting for every known member to (re)join, or
	// for the rebalance timeout.
	PreparingRebalance
	// CompletingRebalance: a generation was formed; waiting for the
	// leader's assignment (LeaderAssigns only).
	CompletingRebalance
	// Stable: every member has its assignment for the current generation.
	Stable
	// Dead: the group does not exist (reported by Describe for unknown or
	// deleted groups, as Kafka does).
	Dead
)

var stateNames = [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Assigning", "Reconciling"}

// String returns Kafka's name for the state, which DescribeGroups and
// ListGroups send verbatim.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "Unknown"
}

// AssignMode says who decides which member owns which partition.
type AssignMode uint8

const (
	// LeaderAssigns: the leader member computes assignments and sends them
	// as opaque bytes in Sync; the coordinator relays them (Kafka classic).
	LeaderAssigns AssignMode = iota
	// BrokerAssigns: the coordinator assigns partitions itself with the
	// assignor named by the selected protocol ("range" or "roundrobin").
	// The generation goes straight to Stable; Sync is optional.
	BrokerAssigns
	// ConsumerProtocol: a KIP-848 consumer group, assigned by the
	// coordinator through heartbeats (consumer*.go). No JoinRequest
	// carries it: it is the mode of a group ConsumerHeartbeat made, so
	// that EventGroupProtocol keeps the group's type across a restart.
	ConsumerProtocol
)

// Assignor names understood in BrokerAssigns mode.
const (
	AssignorRange      = "range"
	AssignorRoundRobin = "roundrobin"
)

// Ticket names a Join or Sync whose answer may come later. The caller keeps
// a waiter per ticket; the result arrives in some Output. A ticket whose
// caller has gone away (disconnect) is simply never collected.
type Ticket uint64

// Protocol is one (name, metadata) pair a member supports, in preference
// order. For Kafka consumers the name is the assignor and the metadata the
// encoded subscription.
type Protocol struct {
	Name     string
	Metadata []byte
}

// TopicPartitions is a set of partitions of one topic, sorted.
type TopicPartitions struct {
	Topic      string
	Partitions []int32
}

// JoinRequest asks to join (or rejoin) a group.
type JoinRequest struct {
	Group      string
	MemberID   string // "" on a first join
	InstanceID string // static membership (Kafka group.instance.id); "" if none
	ClientID   string // used as the member id prefix and shown by Describe
	ClientHost string
	// RequireKnownMemberID makes a first join answer ErrMemberIDRequired
	// with an id to join again with (Kafka JoinGroup v4+).
	RequireKnownMemberID bool
	Mode                 AssignMode
	ProtocolType         string // "consumer" for Kafka consumers
	Protocols            []Protocol
	// Topics the member subscribes to: BrokerAssigns assigns them, and a
	// change in their partition count triggers a rebalance in both modes.
	Topics           []string
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration // 0 means SessionTimeout (JoinGroup v0)
}

// GroupMember is a member as the leader sees it in a JoinResult.
type GroupMember struct {
	MemberID   string
	InstanceID string
	Metadata   []byte // for the selected protocol
}

// JoinResult answers a JoinRequest's ticket.
type JoinResult struct {
	Ticket     Ticket
	Err        error
	MemberID   string // set with ErrMemberIDRequired too
	Generation int32
	Protocol   string
	// ProtocolType echoes the group's protocol type (JoinGroup v7).
	ProtocolType string
	Leader       string
	// Members is filled only for the leader in LeaderAssigns mode.
	Members []GroupMember
	// Assignment is the member's partitions in BrokerAssigns mode.
	Assignment []TopicPartitions
}

// SyncRequest asks for the member's assignment; the leader of a
// LeaderAssigns group also provides everyone's.
type SyncRequest struct {
	Group        string
	MemberID     string
	InstanceID   string
	Generation   int32
	ProtocolType string // checked when not "" (SyncGroup v5)
	Protocol     string // checked when not ""
	// Assignments maps member id to opaque assignment; leader only.
	Assignments map[string][]byte
}

// SyncResult answers a SyncRequest's ticket.
type SyncResult struct {
	Ticket       Ticket
	Err          error
	ProtocolType string
	Protocol     string
	Assignment   []byte            // LeaderAssigns
	Partitions   []TopicPartitions // BrokerAssigns
}

// MemberRef names a member leaving: by member id, or by instance id for a
// static member (LeaveGroup v3+ batch form).
type MemberRef struct {
	MemberID   string
	InstanceID string
}

// Output is what a call produced besides its direct answer: completed
// tickets to deliver to their waiters, and events to journal before
// acknowledging anything that depends on them.
//
// Removed and Transitions report what changed, for logs and metrics; the
// broker need not act on them.
type Output struct {
	Joins       []JoinResult
	Syncs       []SyncResult
	Events      []Event
	Removed     []Removal
	Transitions []Transition
}

func (o *Output) merge(p Output) {
	o.Joins = append(o.Joins, p.Joins...)
	o.Syncs = append(o.Syncs, p.Syncs...)
	o.Events = append(o.Events, p.Events...)
	o.Removed = append(o.Removed, p.Removed...)
	o.Transitions = append(o.Transitions, p.Transitions...)
}

// Empty reports whether o carries nothing.
func (o Output) Empty() bool {
	return len(o.Joins)+len(o.Syncs)+len(o.Events)+len(o.Removed)+len(o.Transitions) == 0
}

// RemoveReason says why a member left its group.
type RemoveReason uint8

const (
	RemovedLeft           RemoveReason = iota + 1 // LeaveGroup
	RemovedSessionExpired                         // no heartbeat within the session timeout
	RemovedNotRejoined                            // missed the rebalance timeout while others rejoined
	RemovedNotSynced                              // formed a generation but never synced in time
	RemovedReplaced                               // a static member's instance id was taken by a new member id
	RemovedNotRevoked                             // consumer group: kept revoked partitions past the rebalance timeout
)

var removeReasonNames = [...]string{"", "left", "session expired", "did not rejoin", "did not sync", "replaced", "did not revoke"}

func (r RemoveReason) String() string {
	if int(r) < len(removeReasonNames) {
		return removeReasonNames[r]
	}
	return "unknown"
}

// Removal reports a member that is no longer in its group.
type Removal struct {
	Group, MemberID, InstanceID string
	Reason                      RemoveReason
}

// Transition reports a group changing state; Generation is the group's
// generation after the change.
type Transition struct {
	Group      string
	From, To   State
	Generation int32
}
