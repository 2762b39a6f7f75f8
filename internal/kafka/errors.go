package kafka

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-mq/sluice/internal/broker"
)

// errorTable maps broker errors to Kafka error codes: the front-end's one
// table. The first match wins, so more specific errors come first.
var errorTable = []struct {
	err  error
	code *kerr.Error
}{
	// In a cluster, a group request on a node other than the controller; clients find
	// the coordinator again (broker/cluster_groups.go).
	{broker.ErrNotCoordinator, kerr.NotCoordinator},
	{broker.ErrCoordinatorNotAvailable, kerr.CoordinatorNotAvailable},
	{broker.ErrTopicNotFound, kerr.UnknownTopicOrPartition},
	{broker.ErrUnknownPartition, kerr.UnknownTopicOrPartition},
	{broker.ErrTopicExists, kerr.TopicAlreadyExists},
	{broker.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
	{broker.ErrCorruptBatch, kerr.CorruptMessage},
	{broker.ErrRecordTooLarge, kerr.MessageTooLarge},
	{broker.ErrKeyRequired, kerr.InvalidRecord},
	{broker.ErrTransactionsUnsupported, kerr.TransactionalIDAuthorizationFailed},
	// Transactions (broker/txn.go).
	{broker.ErrTxnVersionInCluster, kerr.UnsupportedVersion},
	{broker.ErrDeleteRecordsCompacted, kerr.PolicyViolation},
	{broker.ErrShareSessionNotFound, kerr.ShareSessionNotFound},
	{broker.ErrShareSessionEpoch, kerr.InvalidShareSessionEpoch},
	{broker.ErrShareRecordState, kerr.InvalidRecordState},
	{broker.ErrSubscriptionNotFound, kerr.UnknownTopicOrPartition},
	{broker.ErrTxnFenced, kerr.ProducerFenced},
	{broker.ErrInvalidTxnState, kerr.InvalidTxnState},
	{broker.ErrConcurrentTxns, kerr.ConcurrentTransactions},
	{broker.ErrTxnIDNotFound, kerr.TransactionalIDNotFound},
	{broker.ErrInvalidPIDMapping, kerr.InvalidProducerIDMapping},
	{broker.ErrInvalidTxnTimeout, kerr.InvalidTransactionTimeout},
	{broker.ErrTxnCoordinatorDown, kerr.CoordinatorNotAvailable},
	{broker.ErrTxnAbortable, kerr.TransactionAbortable},
	{broker.ErrControlBatch, kerr.InvalidRecord},
	{broker.ErrUnsupportedCompression, kerr.UnsupportedCompressionType},
	{broker.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
	{broker.ErrProducerFenced, kerr.InvalidProducerEpoch},
	{broker.ErrUnknownProducerID, kerr.UnknownProducerID},
	{broker.ErrClosed, kerr.NotLeaderForPartition},
	// A full or failing disk: Kafka's own answer, which clients retry.
	{broker.ErrStorageFull, kerr.KafkaStorageError},
	{broker.ErrStorageFailed, kerr.KafkaStorageError},
	{broker.ErrInvalidGroupID, kerr.InvalidGroupID},
	{broker.ErrGroupNotFound, kerr.GroupIDNotFound},
	{broker.ErrGroupNotEmpty, kerr.NonEmptyGroup},
	{broker.ErrUnknownMember, kerr.UnknownMemberID},
	{broker.ErrMemberIDRequired, kerr.MemberIDRequired},
	{broker.ErrIllegalGeneration, kerr.IllegalGeneration},
	{broker.ErrRebalanceInProgress, kerr.RebalanceInProgress},
	{broker.ErrInconsistentProtocol, kerr.InconsistentGroupProtocol},
	{broker.ErrInvalidSessionTimeout, kerr.InvalidSessionTimeout},
	{broker.ErrFencedInstanceID, kerr.FencedInstanceID},
	{broker.ErrGroupMaxSize, kerr.GroupMaxSizeReached},
	{broker.ErrMetadataTooLarge, kerr.OffsetMetadataTooLarge},
	{broker.ErrInvalidOffset, kerr.InvalidCommitOffsetSize},
	{broker.ErrGroupSubscribedToTopic, kerr.GroupSubscribedToTopic},
	// KIP-848 consumer groups.
	{broker.ErrInvalidGroupRequest, kerr.InvalidRequest},
	{broker.ErrFencedMemberEpoch, kerr.FencedMemberEpoch},
	{broker.ErrStaleMemberEpoch, kerr.StaleMemberEpoch},
	{broker.ErrUnreleasedInstanceID, kerr.UnreleasedInstanceID},
	{broker.ErrUnsupportedAssignor, kerr.UnsupportedAssignor},
	{broker.ErrInvalidRegex, kerr.InvalidRegularExpression},
	{broker.ErrUnsupportedGroupVersion, kerr.UnsupportedVersion},
	{broker.ErrReplicationUnknown, kerr.RequestTimedOut},
	{context.Canceled, kerr.RequestTimedOut},
	{context.DeadlineExceeded, kerr.RequestTimedOut},
}

// errCode returns the Kafka error code for err (0 for nil). Unknown errors
// are UNKNOWN_SERVER_ERROR; an invalid argument becomes the caller's
// choice of code (it depends on the API: INVALID_PARTITIONS,
// INVALID_CONFIG, INVALID_TOPIC_EXCEPTION…).
func errCode(err error, invalid *kerr.Error) int16 {
	if err == nil {
		return 0
	}
	var nl *broker.NotLeaderError
	if errors.As(err, &nl) {
		if nl.Catalog {
			return kerr.NotController.Code
		}
		return kerr.NotLeaderForPartition.Code
	}
	for _, e := range errorTable {
		if errors.Is(err, e.err) {
			return e.code.Code
		}
	}
	var ia *broker.InvalidArgumentError
	if errors.As(err, &ia) && invalid != nil {
		return invalid.Code
	}
	if errors.As(err, &ia) {
		return kerr.InvalidRequest.Code
	}
	return kerr.UnknownServerError.Code
}

// errMessage is err's text for responses that carry one, nil for no error.
func errMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}

// errInvalidGroupID answers requests naming the empty group id.
var errInvalidGroupID = broker.ErrInvalidGroupID
