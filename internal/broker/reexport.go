package broker

import (
	"github.com/sluice-mq/sluice/internal/group"
	"github.com/sluice-mq/sluice/internal/storage"
)

// The names below are the broker's API although another package defines
// them: the consumer-group coordinator's requests, results and errors
// (internal/group), the sync policy and the sendable file section of the
// logs (internal/storage). The broker re-exports them so that a front-end
// (internal/api, internal/kafka, internal/sqs) and the composition root
// import the broker and nothing below it (deps_test.go enforces it), while
// the pure state machine keeps owning its types: an alias is the same type,
// so no value is converted on the way, and errors.Is matches the very
// sentinel the coordinator returns.
//
// What is here: the types the broker's group methods take and return (so a
// caller can name what it receives), their sentinel errors, the enums a
// front-end switches on, the sync policy and Section. Nothing else: a name
// is added when the broker's API needs it, not to mirror every exported
// identifier of the packages under it.

// Consumer-group requests and results (see the fields' docs in internal/group).
type (
	JoinRequest      = group.JoinRequest
	JoinResult       = group.JoinResult
	GroupMember      = group.GroupMember
	SyncRequest      = group.SyncRequest
	SyncResult       = group.SyncResult
	HeartbeatRequest = group.HeartbeatRequest
	MemberRef        = group.MemberRef
	CommitRequest    = group.CommitRequest
	OffsetCommit     = group.OffsetCommit
	Committed        = group.Committed
	CommittedOffset  = group.CommittedOffset
	GroupSummary     = group.GroupSummary
	GroupInfo        = group.GroupInfo
	MemberInfo       = group.MemberInfo
	TopicPartitions  = group.TopicPartitions

	ConsumerHeartbeatRequest = group.ConsumerHeartbeatRequest
	ConsumerHeartbeatResult  = group.ConsumerHeartbeatResult
	ConsumerGroupConfig      = group.ConsumerConfig

	// GroupProtocol is one (name, metadata) pair a member supports.
	GroupProtocol = group.Protocol
	// AssignMode says who assigns partitions: the group's leader member
	// (LeaderAssigns, Kafka's classic protocol) or the broker.
	AssignMode = group.AssignMode
	// GroupState is a group's place in the rebalance protocol; its String
	// is Kafka's name for it.
	GroupState = group.State
)

// Group types (ListGroups v5, DescribeGroup's Type).
const (
	GroupTypeClassic  = group.TypeClassic
	GroupTypeConsumer = group.TypeConsumer
)

// Assignment modes.
const (
	LeaderAssigns = group.LeaderAssigns
	BrokerAssigns = group.BrokerAssigns
)

// Group states.
const (
	GroupEmpty               = group.Empty
	GroupPreparingRebalance  = group.PreparingRebalance
	GroupCompletingRebalance = group.CompletingRebalance
	GroupStable              = group.Stable
	GroupDead                = group.Dead
	GroupAssigning           = group.Assigning   // KIP-848: a new target is due
	GroupReconciling         = group.Reconciling // KIP-848: members moving to the target
)

// Errors of consumer groups: each is the coordinator's own sentinel (the
// Kafka error it mirrors is documented there), so errors.Is(err,
// broker.ErrUnknownMember) holds for what JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup and CommitOffsets return.
var (
	ErrInvalidGroupID          = group.ErrInvalidGroupID
	ErrGroupNotFound           = group.ErrGroupNotFound
	ErrGroupNotEmpty           = group.ErrGroupNotEmpty
	ErrUnknownMember           = group.ErrUnknownMember
	ErrMemberIDRequired        = group.ErrMemberIDRequired
	ErrIllegalGeneration       = group.ErrIllegalGeneration
	ErrRebalanceInProgress     = group.ErrRebalanceInProgress
	ErrInconsistentProtocol    = group.ErrInconsistentProtocol
	ErrInvalidSessionTimeout   = group.ErrInvalidSessionTimeout
	ErrFencedInstanceID        = group.ErrFencedInstanceID
	ErrGroupMaxSize            = group.ErrGroupMaxSize
	ErrMetadataTooLarge        = group.ErrMetadataTooLarge
	ErrInvalidOffset           = group.ErrInvalidOffset
	ErrNotAssigned             = group.ErrNotAssigned
	ErrUnknownAssignor         = group.ErrUnknownAssignor
	ErrGroupSubscribedToTopic  = group.ErrGroupSubscribedToTopic
	ErrInvalidGroupRequest     = group.ErrInvalidRequest
	ErrFencedMemberEpoch       = group.ErrFencedMemberEpoch
	ErrStaleMemberEpoch        = group.ErrStaleMemberEpoch
	ErrUnreleasedInstanceID    = group.ErrUnreleasedInstanceID
	ErrUnsupportedAssignor     = group.ErrUnsupportedAssignor
	ErrInvalidRegex            = group.ErrInvalidRegex
	ErrUnsupportedGroupVersion = group.ErrUnsupportedVersion
)

// SyncPolicy says when appended data is made durable (Options.Sync); see
// docs/storage.md for what each mode loses on a crash.
type SyncPolicy = storage.SyncPolicy

// SyncMode is a SyncPolicy's mode.
type SyncMode = storage.SyncMode

// Sync modes.
const (
	SyncAlways   = storage.SyncAlways   // every acknowledged write is synced first (group commit)
	SyncInterval = storage.SyncInterval // sync at most every SyncPolicy.Interval
	SyncNever    = storage.SyncNever    // the OS decides
)

// Section is a byte range of a segment file holding whole record batches,
// which a network front-end sends with Section.WriteTo (sendfile on Linux)
// instead of copying it through user space; FetchSection returns it. If
// retention deletes the segment before the section is sent, WriteTo fails
// and the client fetches again.
type Section = storage.Section
