package broker

import (
	"errors"
	"fmt"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// Errors the broker returns. Front-ends map them to their protocol's codes
// with errors.Is / errors.As through one table each; the broker never knows
// which protocol asked.
var (
	ErrQueueNotFound   = errors.New("queue does not exist")
	ErrQueueExists     = errors.New("queue already exists with different settings")
	ErrTopicNotFound   = errors.New("topic does not exist")
	ErrTopicExists     = errors.New("topic already exists")
	ErrMessageTooLarge = errors.New("message is larger than the queue's maximum message size")
	ErrClosed          = errors.New("broker is closed")
	ErrQueueInUse      = errors.New("queue is the dead-letter target of another queue")
	// ErrDirLocked: another broker (another sluice process, or another Open
	// in this one) holds the data directory.
	ErrDirLocked = vfs.ErrDirLocked
	// ErrQueueUnavailable: the queue exists but could not be opened at
	// start (the server log says why); every other queue is served, and
	// DeleteQueue removes it.
	ErrQueueUnavailable = errors.New("queue is unavailable: it could not be opened at start (see the server log)")
)

// InvalidArgumentError reports a request field that is out of range or
// malformed. Nothing was changed.
type InvalidArgumentError struct {
	Field  string
	Reason string
}

func (e *InvalidArgumentError) Error() string {
	return fmt.Sprintf("invalid %s: %s", e.Field, e.Reason)
}

func invalid(field, format string, args ...any) error {
	return &InvalidArgumentError{Field: field, Reason: fmt.Sprintf(format, args...)}
}
