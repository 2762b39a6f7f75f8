package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/sluice-mq/sluice/internal/api"
	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/queue"
)

// The CLI checks a flag before it calls, with the server's own limits
// (imported, not copied, so they cannot drift): the server would refuse
// the same values, but only the CLI can name the flag, and some values
// the server takes as "the default" (receive -n 0 is one message,
// --partitions 0 is one partition) would otherwise do something the user
// did not ask for. These are checks of ranges only; the server stays the
// authority on everything else.

// intRange refuses an integer flag outside [lo, hi].
func intRange[N int | int32 | int64](name string, v, lo, hi N) error {
	if v < lo || v > hi {
		return fmt.Errorf("--%s %d: want %d to %d", name, v, lo, hi)
	}
	return nil
}

// durRange refuses a duration flag outside [lo, hi].
func durRange(name string, v, lo, hi time.Duration) error {
	if v < lo || v > hi {
		return fmt.Errorf("--%s %s: want %s to %s", name, shortDur(v), shortDur(lo), shortDur(hi))
	}
	return nil
}

// changed runs check only for a flag the user gave, so a zero default
// ("the server's default") is never refused.
func changed(fl *pflag.FlagSet, name string, check func() error) error {
	if !fl.Changed(name) {
		return nil
	}
	return check()
}

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// queueFlagErr checks the settings flags of queue create and queue update.
func queueFlagErr(fl *pflag.FlagSet, s *queueSettings) error {
	return firstErr(
		changed(fl, "visibility-timeout", func() error { return durRange("visibility-timeout", s.vis, 0, broker.MaxVisibility) }),
		changed(fl, "retention", func() error { return durRange("retention", s.ret, broker.MinRetention, broker.MaxRetention) }),
		changed(fl, "delay", func() error { return durRange("delay", s.delay, 0, broker.MaxRetention) }),
		changed(fl, "receive-wait", func() error { return durRange("receive-wait", s.wait, 0, broker.MaxReceiveWait) }),
		changed(fl, "max-message-bytes", func() error {
			return intRange("max-message-bytes", s.maxBytes, 1, broker.DefaultMaxMessageBytes)
		}),
		changed(fl, "max-receives", func() error {
			return intRange("max-receives", s.maxReceives, 1, queue.MaxReceivesLimit)
		}),
	)
}

// Limits the CLI uses by name.
const (
	maxReceiveBatch = api.MaxReceiveBatch
	maxSendBatch    = api.MaxSendBatch
	maxAckBatch     = api.MaxAckBatch
	maxReceiveWait  = api.MaxReceiveWait
	maxFetchWait    = api.MaxFetchWait
	maxPartitions   = broker.MaxPartitions
	maxVisibility   = broker.MaxVisibility
)

// Topic limits.
const (
	minTopicMessageBytes = 1024
	maxTopicMessageBytes = broker.MaxTopicMessageBytes
)

// shortDur writes a duration as people type it: 12h, not 12h0m0s.
func shortDur(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
