// Package linger decides how long a group commit waits, before it starts,
// for the members its last commit released to come back.
//
// A group commit (storage's syncer, a broker journal) starts its next write
// as soon as it is asked to. But the members of the last group usually come
// back microseconds after they wake: a producer with its next send, a
// consumer with the ack that follows its receive. The first to come back
// starts the next commit and the others just miss it, so each of them waits
// for two commits instead of one, at every step, and the disk does more,
// smaller syncs. Waiting a little for them (at most half the last commit,
// and never when it carried one member) lets one commit carry them all.
//
// Measured with queuebench (16 producers and 16 consumers, fsync always):
// lingering in the queue journal took single-message round trips from 13.7k
// to 19.3k msgs/s, and lingering in storage's syncer as well took batches of
// ten from 86.2k to 94.9k (docs/benchmarks.md). The price is latency when
// nobody comes back: at most Max per commit. An adaptive variant that stopped lingering after
// lingers that gathered few members lost most of the gain (the benefit is
// fewer, fuller syncs, not everyone coming back), so the rule stays simple.
package linger

import "time"

// Policy is the linger state of one group commit. Its zero value is ready;
// it is used by the committing goroutine only.
type Policy struct {
	// Max bounds one linger; zero means DefaultMax.
	Max time.Duration

	members int           // members of the last commit
	took    time.Duration // how long the last commit took
}

// DefaultMax is the longest linger when Policy.Max is zero.
const DefaultMax = 250 * time.Microsecond

// Next says what to wait for before the next commit: until expect members
// are pending, for at most wait. wait 0 means start now.
func (p *Policy) Next() (expect int, wait time.Duration) {
	if p.members <= 1 || p.took <= 0 {
		return 0, 0 // one member: nobody else to wait for
	}
	limit := p.Max
	if limit <= 0 {
		limit = DefaultMax
	}
	return p.members, min(p.took/2, limit)
}

// Committed reports a commit: how many members it carried and how long it
// took (write and sync).
func (p *Policy) Committed(members int, took time.Duration) {
	p.members, p.took = members, took
}

// Wait waits until pending() reaches expect, or wait passes, or stop is
// closed; kick is signalled (coalescing) whenever a member arrives. It
// returns pending() at the end. A wait of 0 returns at once.
func Wait(expect int, wait time.Duration, pending func() int, kick <-chan struct{}, stop <-chan struct{}) int {
	deadline := time.Now().Add(wait)
	for {
		n := pending()
		left := time.Until(deadline)
		if n >= expect || left <= 0 {
			return n
		}
		t := time.NewTimer(left)
		select {
		case <-kick:
		case <-stop:
			t.Stop()
			return pending()
		case <-t.C:
		}
		t.Stop()
	}
}
