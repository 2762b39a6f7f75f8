package client

import (
	"context"
	"time"
)

// Test hooks, compiled only into this package's tests.

// SetExtendHook makes w call fn after each successful lease extension.
func SetExtendHook(w *Worker, fn func(*Message)) { w.hooks.extended = fn }

// NoJitter makes w's backoff exact, so tests can check its schedule.
func NoJitter(w *Worker) {
	w.cfg.jitter = func(d time.Duration) time.Duration { return d }
}

// BackoffOf is w's nack delay after the n-th failure.
func BackoffOf(w *Worker, n int) time.Duration { return w.backoff(n) }

// PublishStream is the stream a Publisher writes (faked by tests).
type PublishStream = publishStream

// NewTestPublisher is a Publisher over streams open makes, with after as
// its clock for the linger (time.AfterFunc's shape).
func NewTestPublisher(topic string, opts *PublisherOptions, open func(context.Context) PublishStream,
	after func(time.Duration, func()) func() bool) *Publisher {
	return newPublisher(topic, "", opts, open, after)
}

// SetPublisherNow gives p a clock for its adaptive linger (round trips, the
// time since the last answer); set it before the first publish.
func SetPublisherNow(p *Publisher, now func() time.Time) { p.now = now }
