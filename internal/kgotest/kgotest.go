// Package kgotest holds what tests that read through franz-go share. It is for tests only:
// nothing outside _test.go files imports it.
package kgotest

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// DrainValues polls cl, a consumer of its topics from where they should be read, until
// three polls of up to poll each in a row bring no record, and returns the records'
// values in the order polled. A count of records or offsets cannot say when the end is
// reached, since control batches take offsets and yield no records. It stops with the
// first fetch error (a poll's own deadline is none), or ctx's.
func DrainValues(ctx context.Context, cl *kgo.Client, poll time.Duration) ([]string, error) {
	var out []string
	for empty := 0; empty < 3; {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		pctx, cancel := context.WithTimeout(ctx, poll)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := fs.Err0(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return out, err
		}
		got := 0
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)); got++ })
		if got == 0 {
			empty++
		} else {
			empty = 0
		}
	}
	return out, nil
}
