package client

import (
	"errors"
	"fmt"

	"connectrpc.com/connect"

	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// Sentinel errors, one per ErrorInfo reason of the API (common.proto). Test
// with errors.Is; the *Error behind them has the details.
var (
	ErrInvalidArgument        = reasonErr("INVALID_ARGUMENT")
	ErrMalformedRequest       = reasonErr("MALFORMED_REQUEST")
	ErrRequestTooLarge        = reasonErr("REQUEST_TOO_LARGE")
	ErrMessageTooLarge        = reasonErr("MESSAGE_TOO_LARGE")
	ErrInvalidName            = reasonErr("INVALID_NAME")
	ErrQueueNotFound          = reasonErr("QUEUE_NOT_FOUND")
	ErrQueueAlreadyExists     = reasonErr("QUEUE_ALREADY_EXISTS")
	ErrQueueInUse             = reasonErr("QUEUE_IN_USE")
	ErrTopicNotFound          = reasonErr("TOPIC_NOT_FOUND")
	ErrTopicAlreadyExists     = reasonErr("TOPIC_ALREADY_EXISTS")
	ErrPartitionNotFound      = reasonErr("PARTITION_NOT_FOUND")
	ErrPartitionsCannotShrink = reasonErr("PARTITIONS_CANNOT_SHRINK")
	ErrSubscriptionNotFound   = reasonErr("SUBSCRIPTION_NOT_FOUND")
	ErrSubscriptionExists     = reasonErr("SUBSCRIPTION_ALREADY_EXISTS")
	ErrGroupIDRequired        = reasonErr("GROUP_ID_REQUIRED")
	ErrGroupIDNotAllowed      = reasonErr("GROUP_ID_NOT_ALLOWED")
	ErrDelayTooLong           = reasonErr("DELAY_TOO_LONG")
	ErrReceiptInvalid         = reasonErr("RECEIPT_INVALID")
	ErrReceiptStale           = reasonErr("RECEIPT_STALE")
	ErrExtensionLimit         = reasonErr("EXTENSION_LIMIT_EXCEEDED")
	ErrQueueIsNotDeadLetter   = reasonErr("QUEUE_IS_NOT_DEAD_LETTER")
	ErrRedriveNotFound        = reasonErr("REDRIVE_NOT_FOUND")
	ErrRedriveAlreadyRunning  = reasonErr("REDRIVE_ALREADY_RUNNING")
	ErrOffsetOutOfRange       = reasonErr("OFFSET_OUT_OF_RANGE")
	ErrProducerFenced         = reasonErr("PRODUCER_FENCED")
	ErrSequenceOutOfOrder     = reasonErr("SEQUENCE_OUT_OF_ORDER")
	ErrGroupNotFound          = reasonErr("GROUP_NOT_FOUND")
	ErrGroupActive            = reasonErr("GROUP_ACTIVE")
	ErrGroupProtocolMismatch  = reasonErr("GROUP_PROTOCOL_MISMATCH")
	ErrMemberUnknown          = reasonErr("MEMBER_UNKNOWN")
	ErrGenerationStale        = reasonErr("GENERATION_STALE")
	ErrRebalanceInProgress    = reasonErr("REBALANCE_IN_PROGRESS")
	ErrNotReady               = reasonErr("NOT_READY")
	ErrShuttingDown           = reasonErr("SHUTTING_DOWN")
	ErrInternal               = reasonErr("INTERNAL")
	// ErrUnauthenticated: no credentials, or a token the server does not
	// know (WithToken, WithTLS).
	ErrUnauthenticated = reasonErr("UNAUTHENTICATED")
	// ErrPermissionDenied: the caller is known but no rule allows the call;
	// metadata "operation" and "resource" say what was refused.
	ErrPermissionDenied = reasonErr("PERMISSION_DENIED")
)

// ReasonError is the type of the sentinels: a reason and nothing else.
type ReasonError struct{ Reason string }

func (e *ReasonError) Error() string { return "sluice: " + e.Reason }

var sentinels = map[string]*ReasonError{}

func reasonErr(reason string) *ReasonError {
	e := &ReasonError{Reason: reason}
	sentinels[reason] = e
	return e
}

// Error is a failed call: the Connect code, the server's reason and
// metadata, and its message (for people; it may change between versions).
type Error struct {
	Code     connect.Code
	Reason   string            // e.g. "RECEIPT_STALE"; empty when the server sent none
	Metadata map[string]string // which field, which limit, which queue
	Message  string
	cause    *connect.Error
}

func (e *Error) Error() string {
	switch {
	case e.Reason == "":
		return fmt.Sprintf("sluice: %s: %s", e.Code, e.Message)
	case e.Message == "" || e.Message == e.Reason:
		// A batch item's failure carries a reason and no message: say the
		// reason once, not "RECEIPT_STALE: RECEIPT_STALE".
		return "sluice: " + e.Reason
	}
	return fmt.Sprintf("sluice: %s: %s", e.Reason, e.Message)
}

// Is matches the sentinel of e's reason.
func (e *Error) Is(target error) bool {
	s, ok := sentinels[e.Reason]
	return ok && s == target
}

// Unwrap exposes the *connect.Error (connect.CodeOf works on e).
func (e *Error) Unwrap() error { return e.cause }

// wrap turns a Connect error into an *Error; other errors (a cancelled
// context, a refused connection) pass through unchanged.
func wrap(err error) error {
	var cerr *connect.Error
	if err == nil || !errors.As(err, &cerr) {
		return err
	}
	out := &Error{Code: cerr.Code(), Message: cerr.Message(), cause: cerr}
	for _, d := range cerr.Details() {
		v, derr := d.Value()
		if derr != nil {
			continue
		}
		if info, ok := v.(*sluicev1.ErrorInfo); ok {
			out.Reason, out.Metadata = info.GetReason(), info.GetMetadata()
			break
		}
	}
	if out.Reason == "" {
		out.Reason = reasonForCode(cerr.Code())
	}
	return out
}

// reasonForCode covers errors answered before a sluice handler runs (a body
// that does not parse or is too large), which carry a code but no detail.
func reasonForCode(c connect.Code) string {
	switch c {
	case connect.CodeInvalidArgument:
		return "MALFORMED_REQUEST"
	case connect.CodeResourceExhausted:
		return "REQUEST_TOO_LARGE"
	case connect.CodeInternal:
		return "INTERNAL"
	}
	return ""
}

// ReasonOf returns the reason of err ("" if it has none).
func ReasonOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// ItemError is one item's failure inside a batch answer (AckBatch).
func itemError(info *sluicev1.ErrorInfo) error {
	if info == nil {
		return nil
	}
	return &Error{Code: connect.CodeUnknown, Reason: info.GetReason(), Metadata: info.GetMetadata()}
}
