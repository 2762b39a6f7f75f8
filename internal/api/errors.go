package api

import (
	"context"
	"errors"
	"log/slog"
	"strconv"

	"connectrpc.com/connect"

	"github.com/sluice-mq/sluice/internal/broker"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// Reasons are the stable ErrorInfo.reason strings of common.proto. Clients
// branch on them, so they are never renamed or reused.
const (
	ReasonInvalidArgument   = "INVALID_ARGUMENT"
	ReasonMessageTooLarge   = "MESSAGE_TOO_LARGE"
	ReasonInvalidName       = "INVALID_NAME"
	ReasonQueueNotFound     = "QUEUE_NOT_FOUND"
	ReasonQueueExists       = "QUEUE_ALREADY_EXISTS"
	ReasonQueueInUse        = "QUEUE_IN_USE"
	ReasonTopicNotFound     = "TOPIC_NOT_FOUND"
	ReasonTopicExists       = "TOPIC_ALREADY_EXISTS"
	ReasonGroupIDRequired   = "GROUP_ID_REQUIRED"
	ReasonGroupIDNotAllowed = "GROUP_ID_NOT_ALLOWED"
	ReasonDelayTooLong      = "DELAY_TOO_LONG"
	ReasonReceiptInvalid    = "RECEIPT_INVALID"
	ReasonReceiptStale      = "RECEIPT_STALE"
	ReasonExtensionLimit    = "EXTENSION_LIMIT_EXCEEDED"
	ReasonNotDeadLetter     = "QUEUE_IS_NOT_DEAD_LETTER"
	ReasonRedriveNotFound   = "REDRIVE_NOT_FOUND"
	ReasonRedriveRunning    = "REDRIVE_ALREADY_RUNNING"
	ReasonShuttingDown      = "SHUTTING_DOWN"
	ReasonCancelled         = "CANCELLED"
	ReasonDeadlineExceeded  = "DEADLINE_EXCEEDED"
	ReasonInternal          = "INTERNAL"
)

// Reasons of topics, records, subscriptions and groups.
const (
	ReasonPartitionNotFound = "PARTITION_NOT_FOUND"
	ReasonOffsetOutOfRange  = "OFFSET_OUT_OF_RANGE"
	ReasonProducerFenced    = "PRODUCER_FENCED"
	ReasonSequenceOrder     = "SEQUENCE_OUT_OF_ORDER"
	ReasonSubNotFound       = "SUBSCRIPTION_NOT_FOUND"
	ReasonSubExists         = "SUBSCRIPTION_ALREADY_EXISTS"
	ReasonGroupNotFound     = "GROUP_NOT_FOUND"
	ReasonGroupActive       = "GROUP_ACTIVE"
	ReasonGroupProtocol     = "GROUP_PROTOCOL_MISMATCH"
	ReasonMemberUnknown     = "MEMBER_UNKNOWN"
	ReasonGenerationStale   = "GENERATION_STALE"
	ReasonRebalance         = "REBALANCE_IN_PROGRESS"
	ReasonPartitionsShrink  = "PARTITIONS_CANNOT_SHRINK"
	// The broker's disk is full (sends refused; acks and deletes work) or
	// answered an I/O error.
	ReasonStorageFull = "STORAGE_FULL"
	// The queue exists but could not be opened at start; DeleteQueue
	// removes it.
	ReasonQueueUnavailable = "QUEUE_UNAVAILABLE"
	ReasonStorageFailed    = "STORAGE_FAILED"
	// ReasonNotLeader: in a cluster, this node does not lead the partition (or the
	// catalog); the error's metadata "leader" names the node that does, if known.
	ReasonNotLeader = "NOT_LEADER"
	// ReasonReplicationUnknown: a replicated write may or may not have been committed.
	ReasonReplicationUnknown = "REPLICATION_UNKNOWN"
	// ReasonNotCoordinator: in a cluster, a consumer-group call on a node that does not
	// coordinate groups (the controller does): retry on the controller.
	ReasonNotCoordinator = "NOT_COORDINATOR"
	// ReasonNotReplicated: in a cluster, a queue feature the replicated queue lacks (FIFO,
	// dead-letter queues, purge, redrive); refused rather than served unreplicated.
	ReasonNotReplicated = "NOT_REPLICATED"
)

// errorRule maps one broker error (matched with errors.Is) to a Connect code
// and a reason.
type errorRule struct {
	target error
	code   connect.Code
	reason string
}

// errorTable is the one place broker errors become protocol errors. Order
// matters only where one error wraps another; the first match wins.
var errorTable = []errorRule{
	{broker.ErrQueueNotFound, connect.CodeNotFound, ReasonQueueNotFound},
	{broker.ErrQueueExists, connect.CodeAlreadyExists, ReasonQueueExists},
	{broker.ErrQueueInUse, connect.CodeFailedPrecondition, ReasonQueueInUse},
	{broker.ErrQueueUnavailable, connect.CodeUnavailable, ReasonQueueUnavailable},
	{broker.ErrTopicNotFound, connect.CodeNotFound, ReasonTopicNotFound},
	{broker.ErrTopicExists, connect.CodeAlreadyExists, ReasonTopicExists},
	{broker.ErrMessageTooLarge, connect.CodeInvalidArgument, ReasonMessageTooLarge},
	{broker.ErrReceiptStale, connect.CodeFailedPrecondition, ReasonReceiptStale},
	// Extending a delivery whose visibility already ran out: the message is
	// (or may be) someone else's now, which is exactly what "stale" promises.
	{broker.ErrNotInFlight, connect.CodeFailedPrecondition, ReasonReceiptStale},
	{broker.ErrReceiptInvalid, connect.CodeInvalidArgument, ReasonReceiptInvalid},
	{broker.ErrExtensionLimit, connect.CodeFailedPrecondition, ReasonExtensionLimit},
	{broker.ErrRedriveNotFound, connect.CodeNotFound, ReasonRedriveNotFound},
	{broker.ErrRedriveRunning, connect.CodeAlreadyExists, ReasonRedriveRunning},
	{broker.ErrUnknownPartition, connect.CodeNotFound, ReasonPartitionNotFound},
	{broker.ErrOffsetOutOfRange, connect.CodeOutOfRange, ReasonOffsetOutOfRange},
	{broker.ErrRecordTooLarge, connect.CodeInvalidArgument, ReasonMessageTooLarge},
	{broker.ErrCorruptBatch, connect.CodeInvalidArgument, ReasonInvalidArgument},
	{broker.ErrControlBatch, connect.CodeInvalidArgument, ReasonInvalidArgument},
	{broker.ErrKeyRequired, connect.CodeInvalidArgument, ReasonInvalidArgument},
	{broker.ErrProducerFenced, connect.CodeFailedPrecondition, ReasonProducerFenced},
	{broker.ErrOutOfOrderSequence, connect.CodeFailedPrecondition, ReasonSequenceOrder},
	{broker.ErrUnknownProducerID, connect.CodeInvalidArgument, ReasonInvalidArgument},
	{broker.ErrSubscriptionNotFound, connect.CodeNotFound, ReasonSubNotFound},
	{broker.ErrSubscriptionExists, connect.CodeAlreadyExists, ReasonSubExists},
	{broker.ErrNotCoordinator, connect.CodeUnavailable, ReasonNotCoordinator},
	{broker.ErrCoordinatorNotAvailable, connect.CodeUnavailable, ReasonNotCoordinator},
	{broker.ErrGroupNotFound, connect.CodeNotFound, ReasonGroupNotFound},
	{broker.ErrGroupNotEmpty, connect.CodeFailedPrecondition, ReasonGroupActive},
	{broker.ErrInconsistentProtocol, connect.CodeFailedPrecondition, ReasonGroupProtocol},
	{broker.ErrUnknownMember, connect.CodeNotFound, ReasonMemberUnknown},
	{broker.ErrIllegalGeneration, connect.CodeFailedPrecondition, ReasonGenerationStale},
	{broker.ErrRebalanceInProgress, connect.CodeAborted, ReasonRebalance},
	{broker.ErrInvalidGroupID, connect.CodeInvalidArgument, ReasonInvalidName},
	{broker.ErrInvalidSessionTimeout, connect.CodeInvalidArgument, ReasonInvalidArgument},
	{broker.ErrInvalidOffset, connect.CodeInvalidArgument, ReasonInvalidArgument},
	{broker.ErrMetadataTooLarge, connect.CodeInvalidArgument, ReasonInvalidArgument},
	{broker.ErrNotAssigned, connect.CodeFailedPrecondition, ReasonGenerationStale},
	{broker.ErrUnknownAssignor, connect.CodeInvalidArgument, ReasonInvalidArgument},
	{broker.ErrClosed, connect.CodeUnavailable, ReasonShuttingDown},
	{broker.ErrNotLeader, connect.CodeUnavailable, ReasonNotLeader},
	{broker.ErrReplicationUnknown, connect.CodeUnavailable, ReasonReplicationUnknown},
	{broker.ErrNotReplicated, connect.CodeUnimplemented, ReasonNotReplicated},
	{broker.ErrStorageFull, connect.CodeResourceExhausted, ReasonStorageFull},
	{broker.ErrStorageFailed, connect.CodeUnavailable, ReasonStorageFailed},
	{context.Canceled, connect.CodeCanceled, ReasonCancelled},
	{context.DeadlineExceeded, connect.CodeDeadlineExceeded, ReasonDeadlineExceeded},
}

// invalidFieldReasons gives broker.InvalidArgumentError fields that have a
// reason of their own; every other field is INVALID_ARGUMENT.
var invalidFieldReasons = map[string]string{
	"name": ReasonInvalidName,
}

// apiError builds a Connect error carrying an ErrorInfo detail. meta names
// the request's subjects (queue, topic, …) and is copied.
func apiError(code connect.Code, reason string, err error, meta map[string]string) *connect.Error {
	cerr := connect.NewError(code, err)
	info := &sluicev1.ErrorInfo{Reason: reason, Metadata: map[string]string{}}
	for k, v := range meta {
		if v != "" {
			info.Metadata[k] = v
		}
	}
	if d, derr := connect.NewErrorDetail(info); derr == nil {
		cerr.AddDetail(d)
	}
	return cerr
}

// invalidArg is the API's own refusal of a request field, before any broker
// call.
func invalidArg(reason, field, msg string, meta map[string]string) *connect.Error {
	m := map[string]string{"field": field}
	for k, v := range meta {
		m[k] = v
	}
	return apiError(connect.CodeInvalidArgument, reason, errors.New(msg), m)
}

// classify finds the code and reason for a broker error.
func classify(err error) (connect.Code, string, map[string]string) {
	var inv *broker.InvalidArgumentError
	if errors.As(err, &inv) {
		reason, ok := invalidFieldReasons[inv.Field]
		if !ok {
			reason = ReasonInvalidArgument
		}
		return connect.CodeInvalidArgument, reason, map[string]string{"field": inv.Field}
	}
	var nl *broker.NotLeaderError
	if errors.As(err, &nl) && nl.Leader != 0 {
		return connect.CodeUnavailable, ReasonNotLeader, map[string]string{"leader": strconv.Itoa(int(nl.Leader))}
	}
	for _, r := range errorTable {
		if errors.Is(err, r.target) {
			return r.code, r.reason, nil
		}
	}
	return connect.CodeInternal, ReasonInternal, nil
}

// toConnect turns a broker error into the Connect error the client sees.
// Unknown errors are internal: logged in full, answered without detail
// beyond INTERNAL so no server internals leak.
func (a *API) toConnect(err error, meta map[string]string) error {
	if err == nil {
		return nil
	}
	var cerr *connect.Error
	if errors.As(err, &cerr) {
		return cerr
	}
	code, reason, extra := classify(err)
	for k, v := range meta {
		if extra == nil {
			extra = map[string]string{}
		}
		extra[k] = v
	}
	if code == connect.CodeInternal {
		a.log.Error("internal error", "err", err)
		return apiError(code, reason, errors.New("internal error; the server log has the details"), extra)
	}
	return apiError(code, reason, err, extra)
}

// errorInfo is the ErrorInfo of err, for per-item results (AckBatch).
func errorInfo(err error, meta map[string]string) *sluicev1.ErrorInfo {
	_, reason, extra := classify(err)
	info := &sluicev1.ErrorInfo{Reason: reason, Metadata: map[string]string{}}
	for _, m := range []map[string]string{extra, meta} {
		for k, v := range m {
			info.Metadata[k] = v
		}
	}
	return info
}

func logPanic(log *slog.Logger, procedure string, v any, stack string) {
	log.Error("handler panicked", "procedure", procedure, "panic", v, "stack", stack)
}
