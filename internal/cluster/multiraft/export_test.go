package multiraft

import "time"

// What Run does with a Sleeper (sleep.go), for the deterministic harness that drives hosts
// by hand as Run would: Arm before waiting, Fired on a tick, Woken on work.

func (h *Host) Arm(s Sleeper) uint64 { return h.arm(s) }
func (h *Host) Fired(s Sleeper)      { h.fired(s) }
func (h *Host) Woken(s Sleeper)      { h.woken(s) }

// NewTimeTickerForTest is NewTimeTicker as the Sleeper it is.
func NewTimeTickerForTest(d time.Duration) Sleeper { return NewTimeTicker(d).(Sleeper) }

// SetSnapshotStoreBudget changes how long a round may store encoded snapshots
// (snapshotStoreBudget); 0 stores one per round.
func (h *Host) SetSnapshotStoreBudget(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.storeBudget = d
}
