package sqs

import (
	"context"
	"sync"
	"time"
)

// FIFO receive retries. A FIFO consumer whose ReceiveMessage answer was lost
// retries with the same ReceiveRequestAttemptId and must get the same
// messages and receipts back; otherwise those messages would sit hidden
// until their visibility ends, blocking their groups. This is request
// idempotency of the SQS protocol, not queue state, so it lives here: the
// handler remembers each attempt's answer for 5 minutes, and a retry
// restarts the messages' visibility timeout (as SQS does) and answers the
// same messages, as long as every receipt is still current. If any message
// was deleted or received again since, the retry is a fresh receive.

const (
	attemptWindow = 5 * time.Minute
	maxAttempts   = 10_000 // bound on remembered attempts; past it, new ones are not remembered
)

type attemptKey struct{ queue, id string }

type attempt struct {
	at   time.Time
	msgs []message
}

type attempts struct {
	mu sync.Mutex // guards m
	m  map[attemptKey]attempt
}

// replay answers a retried attempt, or reports false for a fresh receive.
func (h *Handler) replayAttempt(ctx context.Context, queue, id string, visibility time.Duration) ([]message, bool) {
	key := attemptKey{queue, id}
	h.attempts.mu.Lock()
	a, ok := h.attempts.m[key]
	if ok && time.Since(a.at) > attemptWindow {
		delete(h.attempts.m, key)
		ok = false
	}
	h.attempts.mu.Unlock()
	if !ok {
		return nil, false
	}
	for _, m := range a.msgs {
		if err := h.b.Extend(ctx, queue, m.ReceiptHandle, visibility); err != nil {
			h.forgetAttempt(key)
			return nil, false
		}
	}
	return a.msgs, true
}

func (h *Handler) rememberAttempt(queue, id string, msgs []message) {
	if len(msgs) == 0 {
		return
	}
	h.attempts.mu.Lock()
	defer h.attempts.mu.Unlock()
	if h.attempts.m == nil {
		h.attempts.m = map[attemptKey]attempt{}
	}
	if len(h.attempts.m) >= maxAttempts {
		for k, a := range h.attempts.m {
			if time.Since(a.at) > attemptWindow {
				delete(h.attempts.m, k)
			}
		}
		if len(h.attempts.m) >= maxAttempts {
			return
		}
	}
	h.attempts.m[attemptKey{queue, id}] = attempt{at: time.Now(), msgs: msgs}
}

func (h *Handler) forgetAttempt(key attemptKey) {
	h.attempts.mu.Lock()
	delete(h.attempts.m, key)
	h.attempts.mu.Unlock()
}
