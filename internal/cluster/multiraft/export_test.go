package multiraft

// What Run does with a Sleeper (sleep.go), for the deterministic harness that drives hosts
// by hand as Run would: Arm before waiting, Fired on a tick, Woken on work.

func (h *Host) Arm(s Sleeper) uint64 { return h.arm(s) }
func (h *Host) Fired(s Sleeper)      { h.fired(s) }
func (h *Host) Woken(s Sleeper)      { h.woken(s) }
