package api

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/sluice-mq/sluice/internal/broker"
)

// The error table is the API's contract with clients: every broker error a
// handler can meet maps to a stable code and reason, wrapped or not.
func TestErrorTable(t *testing.T) {
	for _, tc := range []struct {
		err    error
		code   connect.Code
		reason string
	}{
		{broker.ErrQueueNotFound, connect.CodeNotFound, "QUEUE_NOT_FOUND"},
		{fmt.Errorf("%w: emails", broker.ErrQueueNotFound), connect.CodeNotFound, "QUEUE_NOT_FOUND"},
		{broker.ErrQueueExists, connect.CodeAlreadyExists, "QUEUE_ALREADY_EXISTS"},
		{broker.ErrQueueInUse, connect.CodeFailedPrecondition, "QUEUE_IN_USE"},
		{broker.ErrTopicNotFound, connect.CodeNotFound, "TOPIC_NOT_FOUND"},
		{broker.ErrTopicExists, connect.CodeAlreadyExists, "TOPIC_ALREADY_EXISTS"},
		{broker.ErrMessageTooLarge, connect.CodeInvalidArgument, "MESSAGE_TOO_LARGE"},
		{broker.ErrRecordTooLarge, connect.CodeInvalidArgument, "MESSAGE_TOO_LARGE"},
		{fmt.Errorf("ack: %w", broker.ErrReceiptStale), connect.CodeFailedPrecondition, "RECEIPT_STALE"},
		{broker.ErrNotInFlight, connect.CodeFailedPrecondition, "RECEIPT_STALE"},
		{broker.ErrReceiptInvalid, connect.CodeInvalidArgument, "RECEIPT_INVALID"},
		{broker.ErrExtensionLimit, connect.CodeFailedPrecondition, "EXTENSION_LIMIT_EXCEEDED"},
		{broker.ErrRedriveNotFound, connect.CodeNotFound, "REDRIVE_NOT_FOUND"},
		{broker.ErrRedriveRunning, connect.CodeAlreadyExists, "REDRIVE_ALREADY_RUNNING"},
		{broker.ErrUnknownPartition, connect.CodeNotFound, "PARTITION_NOT_FOUND"},
		{broker.ErrOffsetOutOfRange, connect.CodeOutOfRange, "OFFSET_OUT_OF_RANGE"},
		{broker.ErrProducerFenced, connect.CodeFailedPrecondition, "PRODUCER_FENCED"},
		{broker.ErrOutOfOrderSequence, connect.CodeFailedPrecondition, "SEQUENCE_OUT_OF_ORDER"},
		{broker.ErrSubscriptionNotFound, connect.CodeNotFound, "SUBSCRIPTION_NOT_FOUND"},
		{broker.ErrSubscriptionExists, connect.CodeAlreadyExists, "SUBSCRIPTION_ALREADY_EXISTS"},
		{broker.ErrGroupNotEmpty, connect.CodeFailedPrecondition, "GROUP_ACTIVE"},
		{broker.ErrUnknownMember, connect.CodeNotFound, "MEMBER_UNKNOWN"},
		{broker.ErrIllegalGeneration, connect.CodeFailedPrecondition, "GENERATION_STALE"},
		{broker.ErrRebalanceInProgress, connect.CodeAborted, "REBALANCE_IN_PROGRESS"},
		{broker.ErrInconsistentProtocol, connect.CodeFailedPrecondition, "GROUP_PROTOCOL_MISMATCH"},
		{broker.ErrClosed, connect.CodeUnavailable, "SHUTTING_DOWN"},
		{&broker.InvalidArgumentError{Field: "name", Reason: "bad"}, connect.CodeInvalidArgument, "INVALID_NAME"},
		{&broker.InvalidArgumentError{Field: "retention", Reason: "bad"}, connect.CodeInvalidArgument, "INVALID_ARGUMENT"},
		{context.Canceled, connect.CodeCanceled, "CANCELLED"},
		{errors.New("disk on fire"), connect.CodeInternal, "INTERNAL"},
	} {
		t.Run(tc.reason+"/"+tc.err.Error(), func(t *testing.T) {
			code, reason, _ := classify(tc.err)
			if code != tc.code || reason != tc.reason {
				t.Errorf("classify(%v) = %v %s, want %v %s", tc.err, code, reason, tc.code, tc.reason)
			}
		})
	}
}

// An internal error is logged, not shown: the client gets INTERNAL and no
// server detail.
func TestInternalErrorsHideDetails(t *testing.T) {
	a := New(Options{})
	err := a.toConnect(errors.New("open /secret/path: permission denied"), nil)
	var cerr *connect.Error
	if !errors.As(err, &cerr) || cerr.Code() != connect.CodeInternal {
		t.Fatalf("got %v", err)
	}
	if msg := cerr.Message(); msg == "" || errors.Is(err, context.Canceled) || strings.Contains(msg, "/secret/path") {
		t.Errorf("internal error message %q leaks the cause", msg)
	}
}
