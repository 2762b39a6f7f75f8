package sqs

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/sluice-mq/sluice/internal/broker"
)

// errKind is one SQS error as both protocols spell it: the JSON shape name
// (sent as "com.amazonaws.sqs#<shape>" in __type), the query protocol's
// code (in <Code> and in the JSON answer's x-amzn-query-error header, which
// the JSON SDKs read to keep the codes SDK users match on), the HTTP status,
// and whether the fault is the sender's. Codes and statuses follow the SQS
// API model's awsQueryError traits.
type errKind struct {
	shape  string
	code   string
	status int
	sender bool
}

// The SQS errors sluice answers with.
var (
	errQueueDoesNotExist  = errKind{"QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue", 400, true}
	errQueueNameExists    = errKind{"QueueNameExists", "QueueAlreadyExists", 400, true}
	errInvalidParameter   = errKind{"InvalidParameterValue", "InvalidParameterValue", 400, true}
	errMissingParameter   = errKind{"MissingParameter", "MissingParameter", 400, true}
	errInvalidAttrName    = errKind{"InvalidAttributeName", "InvalidAttributeName", 400, true}
	errInvalidAttrValue   = errKind{"InvalidAttributeValue", "InvalidAttributeValue", 400, true}
	errReceiptInvalid     = errKind{"ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid", 404, true}
	errMessageNotInflight = errKind{"MessageNotInflight", "AWS.SimpleQueueService.MessageNotInflight", 400, true}
	errInvalidContents    = errKind{"InvalidMessageContents", "InvalidMessageContents", 400, true}
	errEmptyBatch         = errKind{"EmptyBatchRequest", "AWS.SimpleQueueService.EmptyBatchRequest", 400, true}
	errTooManyEntries     = errKind{"TooManyEntriesInBatchRequest", "AWS.SimpleQueueService.TooManyEntriesInBatchRequest", 400, true}
	errIdsNotDistinct     = errKind{"BatchEntryIdsNotDistinct", "AWS.SimpleQueueService.BatchEntryIdsNotDistinct", 400, true}
	errInvalidBatchID     = errKind{"InvalidBatchEntryId", "AWS.SimpleQueueService.InvalidBatchEntryId", 400, true}
	errBatchTooLong       = errKind{"BatchRequestTooLong", "AWS.SimpleQueueService.BatchRequestTooLong", 400, true}
	errResourceNotFound   = errKind{"ResourceNotFoundException", "ResourceNotFoundException", 404, true}
	errInvalidAddress     = errKind{"InvalidAddress", "InvalidAddress", 404, true}
	errInvalidAction      = errKind{"InvalidAction", "InvalidAction", 400, true}
	errMissingAction      = errKind{"MissingAction", "MissingAction", 400, true}
	errMalformedQuery     = errKind{"MalformedQueryString", "MalformedQueryString", 400, true}
	errSerialization      = errKind{"SerializationException", "SerializationException", 400, true}
	errRequestTooLarge    = errKind{"RequestEntityTooLarge", "RequestEntityTooLarge", 413, true}
	errInternal           = errKind{"InternalFailure", "InternalFailure", 500, false}
	errUnavailable        = errKind{"ServiceUnavailable", "ServiceUnavailable", 503, false}
	errUnsupported        = errKind{"UnsupportedOperation", "AWS.SimpleQueueService.UnsupportedOperation", 400, true}
)

// The authentication and authorization errors, AWS's common errors rather
// than SQS's own: the query codes are those the SQS API reference lists,
// the JSON shapes those of AWS's JSON services (namespace included), and
// the SDKs read the code from x-amzn-query-error either way.
var (
	errMissingAuthToken    = errKind{"com.amazon.coral.service#MissingAuthenticationTokenException", "MissingAuthenticationToken", 403, true}
	errInvalidClientToken  = errKind{"com.amazon.coral.service#UnrecognizedClientException", "InvalidClientTokenId", 403, true}
	errSignatureMismatch   = errKind{"com.amazon.coral.service#InvalidSignatureException", "SignatureDoesNotMatch", 403, true}
	errIncompleteSignature = errKind{"com.amazon.coral.service#IncompleteSignatureException", "IncompleteSignature", 400, true}
	errRequestExpired      = errKind{"com.amazon.coral.service#RequestExpired", "RequestExpired", 400, true}
	errAccessDenied        = errKind{"com.amazon.coral.service#AccessDeniedException", "AccessDenied", 403, true}
)

// apiError is an SQS error ready to encode.
type apiError struct {
	kind    errKind
	message string
	// cause is kept where the handler still acts on it: a *broker.NotLeaderError, which
	// ServeHTTP forwards to the leader (forward.go) rather than answer.
	cause error
}

func (e *apiError) Error() string { return e.kind.code + ": " + e.message }
func (e *apiError) Unwrap() error { return e.cause }

func newError(k errKind, format string, args ...any) *apiError {
	return &apiError{kind: k, message: fmt.Sprintf(format, args...)}
}

func missing(param string) *apiError {
	return newError(errMissingParameter, "The request must contain the parameter %s.", param)
}

func invalidValue(param string, value any, reason string) *apiError {
	return newError(errInvalidParameter, "Value %v for parameter %s is invalid. Reason: %s.", value, param, reason)
}

func unknownAction(action string) *apiError {
	return newError(errInvalidAction, "The action %s is not valid for this endpoint.", action)
}

func noSuchQueue() *apiError {
	return newError(errQueueDoesNotExist, "The specified queue does not exist.")
}

// toAPIError maps a broker error to SQS's. Receipt errors are mapped by the
// actions themselves, because SQS answers them differently per action.
func toAPIError(err error) *apiError {
	var ae *apiError
	var inv *broker.InvalidArgumentError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, broker.ErrQueueNotFound):
		return noSuchQueue()
	case errors.Is(err, broker.ErrQueueExists):
		return newError(errQueueNameExists, "A queue already exists with the same name and a different value for attribute(s).")
	case errors.Is(err, broker.ErrMessageTooLarge):
		return newError(errInvalidParameter, "One or more parameters are invalid. Reason: %v", err)
	case errors.Is(err, broker.ErrQueueInUse):
		return newError(errInvalidParameter, "%v", err)
	case errors.Is(err, broker.ErrReceiptInvalid):
		return newError(errReceiptInvalid, "The input receipt handle is invalid.")
	case errors.Is(err, broker.ErrReceiptStale):
		return newError(errInvalidParameter, "The receipt handle has expired.")
	case errors.Is(err, broker.ErrNotInFlight):
		return newError(errMessageNotInflight, "The message referred to isn't in flight.")
	case errors.As(err, &inv):
		return newError(errInvalidParameter, "%v", err)
	case errors.Is(err, broker.ErrNotReplicated):
		return newError(errUnsupported, "%v", err)
	case errors.Is(err, broker.ErrNotLeader), errors.Is(err, broker.ErrReplicationUnknown):
		ae := newError(errUnavailable, "%v; retry", err)
		ae.cause = err
		return ae
	case errors.Is(err, broker.ErrClosed):
		return newError(errUnavailable, "the broker is shutting down")
	case errors.Is(err, broker.ErrQueueUnavailable):
		return newError(errUnavailable, "%v", broker.ErrQueueUnavailable)
	case errors.Is(err, broker.ErrStorageFull):
		return newError(errUnavailable, "%v", broker.ErrStorageFull) // names no file of the server's
	case errors.Is(err, broker.ErrStorageFailed):
		return newError(errUnavailable, "%v", broker.ErrStorageFailed)
	}
	return newError(errInternal, "%v", err)
}

// faultType is the <Type> of a query error and the suffix of the
// x-amzn-query-error header.
func (k errKind) faultType() string {
	if k.sender {
		return "Sender"
	}
	return "Receiver"
}

func (h *Handler) writeError(w http.ResponseWriter, c *call, err error) {
	ae := toAPIError(err)
	switch {
	case ae.kind == errUnavailable:
		// The client retries (the SDKs do on 503): a leader moving, a peer down, a full
		// disk. Each has its own warning and metric where it happens; a failover under
		// load answered hundreds of these a second, each one a warning.
		h.log.Debug("sqs: request failed; the client retries", "action", c.action, "err", err)
	case ae.kind.status >= 500:
		h.log.Warn("sqs: request failed", "action", c.action, "err", err)
	}
	if c.json {
		writeJSONError(w, c, ae)
		return
	}
	writeXMLError(w, c, ae)
}
