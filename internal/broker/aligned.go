package broker

import "time"

// untilAligned is how long until the wall clock's next multiple of d. The broker's
// periodic passes (maintenance, the cluster reconciler, transactions' and consumer groups'
// ticks, the compaction cleaner) wait for it rather than for d from whenever each started,
// so an idle process is woken once for all of them, on the same instants as the Raft
// host's liveness beat (multiraft.NewTimeTicker counts from the same epoch), instead of
// once for each at its own phase: on an idle node the wake-ups, not the passes, were most
// of the CPU (docs/benchmarks.md, "Idle").
func untilAligned(d time.Duration) time.Duration {
	now := time.Now()
	return d - now.Sub(now.Truncate(d)) // Truncate strips the monotonic reading: a wall-clock remainder
}
