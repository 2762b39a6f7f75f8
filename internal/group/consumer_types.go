package group

import "time"

// KIP-848 consumer groups ("consumer" type, as opposed to "classic"): the
// coordinator assigns partitions itself and hands them out through
// heartbeats, one reconciliation step at a time. See consumer.go.

// Member epochs with a meaning of their own in a heartbeat.
const (
	JoinEpoch        int32 = 0  // join (or rejoin after being fenced)
	LeaveEpoch       int32 = -1 // leave for good
	StaticLeaveEpoch int32 = -2 // a static member leaves and will come back
)

// Server-side assignors (group.consumer.assignors).
const (
	AssignorUniform = "uniform"
	// AssignorRange is shared with the classic BrokerAssigns mode.
)

// ConsumerAssignors lists the server-side assignors this package
// implements, for validating group.consumer.assignors.
var ConsumerAssignors = []string{AssignorUniform, AssignorRange}

// Group types, as ListGroups v5 and DescribeGroup report them.
const (
	TypeClassic  = "classic"
	TypeConsumer = "consumer"
)

// ConsumerHeartbeatRequest is one ConsumerGroupHeartbeat. Pointer and nil
// slice fields are Kafka's "null: unchanged since the last heartbeat".
type ConsumerHeartbeatRequest struct {
	Group       string
	MemberID    string // "" only on a v0 join: the coordinator makes one
	MemberEpoch int32
	InstanceID  *string
	RackID      *string
	// RebalanceTimeout bounds how long the member may take to revoke
	// partitions; negative: unchanged.
	RebalanceTimeout time.Duration
	Topics           []string // subscribed topic names
	Regex            *string  // subscribed topic regex (v1)
	Assignor         *string  // requested server assignor
	// Owned is what the member holds now; nil: unchanged. It is how a
	// member reports that it released revoked partitions.
	Owned []TopicPartitions
	// MemberIDRequired: the client must name its member id even to join
	// (ConsumerGroupHeartbeat v1+, the client generates it).
	MemberIDRequired     bool
	ClientID, ClientHost string
}

// ConsumerHeartbeatResult answers a heartbeat. Assignment is set (and
// HasAssignment true) when the member's partitions changed or it sent a
// full request; otherwise the member keeps what it has.
type ConsumerHeartbeatResult struct {
	Err               error
	MemberID          string
	MemberEpoch       int32
	HeartbeatInterval time.Duration
	HasAssignment     bool
	Assignment        []TopicPartitions
}

// ConsumerConfig holds the KIP-848 settings, Kafka's broker configs of the
// same names. Zero fields take Kafka's defaults.
type ConsumerConfig struct {
	SessionTimeout    time.Duration // group.consumer.session.timeout.ms, default 45 s
	HeartbeatInterval time.Duration // group.consumer.heartbeat.interval.ms, default 5 s
	// Assignors: group.consumer.assignors, the first is the default;
	// default uniform, range.
	Assignors []string
}

func (c ConsumerConfig) withDefaults() ConsumerConfig {
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 45 * time.Second
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 5 * time.Second
	}
	if len(c.Assignors) == 0 {
		c.Assignors = ConsumerAssignors
	}
	return c
}

// Consumer group states (KIP-848), after the classic ones: Empty and
// Stable are shared.
const (
	// Assigning: the group epoch moved past the target assignment's; the
	// next heartbeat computes a new one.
	Assigning State = Dead + 1 + iota
	// Reconciling: some member has not reached the target assignment.
	Reconciling
)
