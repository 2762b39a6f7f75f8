package group

import "errors"

// Errors the coordinator returns. Each mirrors the Kafka error code named in
// its comment, because the Kafka front-end maps them one to one; the native
// API maps them to its own codes. Wrapped errors keep errors.Is working.
var (
	// ErrInvalidGroupID: the group id is empty (INVALID_GROUP_ID).
	ErrInvalidGroupID = errors.New("group: invalid group id")
	// ErrGroupNotFound: no such group (GROUP_ID_NOT_FOUND).
	ErrGroupNotFound = errors.New("group: group not found")
	// ErrGroupNotEmpty: the group has members, so it cannot be deleted or
	// have its offsets reset (NON_EMPTY_GROUP).
	ErrGroupNotEmpty = errors.New("group: group is not empty")
	// ErrUnknownMember: the member id is not in the group, e.g. it expired
	// or the broker restarted (UNKNOWN_MEMBER_ID). The client rejoins.
	ErrUnknownMember = errors.New("group: unknown member id")
	// ErrMemberIDRequired: a first join that must be repeated with the member
	// id the result carries (MEMBER_ID_REQUIRED, JoinGroup v4+).
	ErrMemberIDRequired = errors.New("group: member id required")
	// ErrIllegalGeneration: the request names a generation other than the
	// group's current one (ILLEGAL_GENERATION). This is the fence that stops
	// a member of an old generation from committing.
	ErrIllegalGeneration = errors.New("group: illegal generation")
	// ErrRebalanceInProgress: the group is rebalancing; the member must
	// rejoin (REBALANCE_IN_PROGRESS).
	ErrRebalanceInProgress = errors.New("group: rebalance in progress")
	// ErrInconsistentProtocol: the member's protocol type or protocols do not
	// fit the group's (INCONSISTENT_GROUP_PROTOCOL).
	ErrInconsistentProtocol = errors.New("group: inconsistent group protocol")
	// ErrInvalidSessionTimeout: outside the configured bounds
	// (INVALID_SESSION_TIMEOUT).
	ErrInvalidSessionTimeout = errors.New("group: invalid session timeout")
	// ErrFencedInstanceID: another member has taken over this static
	// instance id (FENCED_INSTANCE_ID).
	ErrFencedInstanceID = errors.New("group: fenced instance id")
	// ErrGroupMaxSize: the group is full (GROUP_MAX_SIZE_REACHED).
	ErrGroupMaxSize = errors.New("group: group max size reached")
	// ErrMetadataTooLarge: a commit's metadata string is over the limit
	// (OFFSET_METADATA_TOO_LARGE); only that partition is refused.
	ErrMetadataTooLarge = errors.New("group: offset metadata too large")
	// ErrInvalidOffset: a negative offset or partition in a commit or reset
	// (no exact Kafka twin; the front-end uses INVALID_COMMIT_OFFSET_SIZE or
	// UNKNOWN_TOPIC_OR_PARTITION as fits).
	ErrInvalidOffset = errors.New("group: invalid offset")
	// ErrNotAssigned: in BrokerAssigns mode a member committed a partition it
	// does not own in the current generation. Kafka has no such check (its
	// leader assigns); the native API relies on it.
	ErrNotAssigned = errors.New("group: partition not assigned to member")
	// ErrUnknownAssignor: a BrokerAssigns join named no assignor the
	// coordinator implements.
	ErrUnknownAssignor = errors.New("group: unknown assignor")
	// ErrGroupSubscribedToTopic: offsets of a topic an active member
	// subscribes to cannot be deleted (GROUP_SUBSCRIBED_TO_TOPIC).
	ErrGroupSubscribedToTopic = errors.New("group: group is subscribed to the topic")
	// ErrCorruptEvent: UnmarshalEvent found bytes that are not an event.
	ErrCorruptEvent = errors.New("group: corrupt event")
)

// Errors of KIP-848 consumer groups (ConsumerGroupHeartbeat and the
// commits of their members).
var (
	// ErrInvalidRequest: a heartbeat whose fields contradict each other
	// (INVALID_REQUEST); the wrapping error says which.
	ErrInvalidRequest = errors.New("group: invalid request")
	// ErrFencedMemberEpoch: the member's epoch is not the coordinator's
	// (FENCED_MEMBER_EPOCH). The member drops its partitions and rejoins
	// with epoch 0.
	ErrFencedMemberEpoch = errors.New("group: fenced member epoch")
	// ErrStaleMemberEpoch: a commit or offset fetch named an epoch the
	// member no longer has, or a partition it did not own at that epoch
	// (STALE_MEMBER_EPOCH).
	ErrStaleMemberEpoch = errors.New("group: stale member epoch")
	// ErrUnreleasedInstanceID: a static member joined with an instance id
	// that a live member still holds (UNRELEASED_INSTANCE_ID).
	ErrUnreleasedInstanceID = errors.New("group: instance id not released")
	// ErrUnsupportedAssignor: the server assignor named is not one of
	// group.consumer.assignors (UNSUPPORTED_ASSIGNOR).
	ErrUnsupportedAssignor = errors.New("group: unsupported assignor")
	// ErrInvalidRegex: the subscribed topic regex does not compile
	// (INVALID_REGULAR_EXPRESSION).
	ErrInvalidRegex = errors.New("group: invalid regular expression")
	// ErrUnsupportedVersion: a consumer-protocol member committed with an
	// OffsetCommit version that cannot carry its member epoch
	// (UNSUPPORTED_VERSION).
	ErrUnsupportedVersion = errors.New("group: unsupported version")
)
