package multiraft

// Sleeping through idle ticks. A host whose every group is quiesced does nothing on a tick
// but count it, check its peers' liveness and, every LivenessTicks, beat them; waking the
// Run loop 20 times a second for that was most of an idle cluster's CPU (the wake-up, the
// scheduler and the runtime's sysmon around it, not the work: docs/benchmarks.md, "Idle").
// So Run, given a Sleeper, asks for the next tick only when one is due: while no group is
// awake, at the next liveness beat or at the first tick a peer would count as down,
// whichever comes first; otherwise every tick, as before.
//
// The ticks slept through still count: the host's clock (h.now) is brought forward by them
// when Run wakes, before anything else happens on it, and a batch received meanwhile is
// stamped with the Sleeper's tick rather than the host's stale one, so a peer's silence is
// measured as if the host had ticked throughout. A group those ticks never ticked was
// quiesced, and a quiesced group's clock is frozen anyway. What a sleep can change is only
// when a woken group first ticks: at the next tick boundary after it woke, as before, since
// the Sleeper keeps the phase of its ticks (Until names a tick, not a delay).

// Sleeper is a Ticker whose ticks Run may skip while the host has nothing to tick. Each
// Until arms C for one value.
type Sleeper interface {
	Ticker
	// Now is how many ticks have come due since the ticker started. Safe from any
	// goroutine: Receive reads it while Run waits.
	Now() uint64
	// Until makes C's next value come once tick n is due (at once if it is already).
	Until(n uint64)
}

// clock is Run's Sleeper as the host sees it (under h.mu).
type clock struct {
	s    Sleeper
	base uint64 // the Sleeper's tick that h.now stands for
	// asleep: Run is waiting past the next tick with no group awake; the ticks in between
	// only move h.now when it wakes.
	asleep bool
}

// arm returns the Sleeper tick Run must next be woken at, and notes whether that is a
// sleep. Called by Run before it waits.
func (h *Host) arm(s Sleeper) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.clk.s != s {
		h.clk = clock{s: s, base: s.Now()}
	}
	n := h.idleTicks()
	h.clk.asleep = n > 1
	return h.clk.base + n
}

// fired takes a value of the Sleeper's C: the ticks slept through move the clock, and the
// tick that came due is a full Tick. Awake, a tick Run took late is one tick, not the
// several that passed (a time.Ticker's rate, which keeps a slow host's groups from
// ticking in bursts).
func (h *Host) fired(s Sleeper) {
	h.mu.Lock()
	now := s.Now()
	if h.clk.s == s && now > h.clk.base {
		if h.clk.asleep {
			h.advance(now - h.clk.base - 1)
		}
		h.clk.base = now
	}
	h.clk.asleep = false
	h.mu.Unlock()
	h.Tick()
}

// woken is Run woken for work (a proposal, a received batch that woke a group) before its
// next tick came: if it was asleep, the ticks slept through so far move the clock now, so
// the work is done at the right time and a group it woke first ticks at the next tick
// boundary (arm), as it would have with the host ticking throughout.
func (h *Host) woken(s Sleeper) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.clk.s != s || !h.clk.asleep {
		return
	}
	if now := s.Now(); now > h.clk.base {
		h.advance(now - h.clk.base)
		h.clk.base = now
	}
	h.clk.asleep = false
}

// advance moves the clock over n ticks in which no group was awake: nothing ticks, but a
// peer may have gone silent for too long meanwhile (under h.mu).
func (h *Host) advance(n uint64) {
	if n == 0 || h.closed {
		return
	}
	h.now += n
	h.checkLiveness()
}

// idleTicks is how many ticks from now the host needs its next one (under h.mu): 1 while
// a group is awake or has work; otherwise until the next liveness beat, or the first tick
// at which a live peer not heard from since would count as down, whichever is sooner.
func (h *Host) idleTicks() uint64 {
	if len(h.active) > 0 || len(h.dirty) > 0 || len(h.outbox) > 0 || h.closed {
		return 1
	}
	every, phase := uint64(h.cfg.LivenessTicks), h.beatPhase()
	n := ((h.now+phase)/every+1)*every - phase - h.now
	for _, p := range h.peers {
		if !p.alive {
			continue // a dead peer comes back by a batch, not by a tick
		}
		down := p.lastHeard + uint64(h.cfg.NodeTimeoutTicks) + 1 // checkLiveness's first
		if down <= h.now {
			return 1
		}
		n = min(n, down-h.now)
	}
	return n
}

// clockNow is the host's tick as of now (under h.mu): while Run sleeps, h.now lags by the
// ticks slept through so far.
func (h *Host) clockNow() uint64 {
	if h.clk.asleep {
		if now := h.clk.s.Now(); now > h.clk.base {
			return h.now + now - h.clk.base
		}
	}
	return h.now
}

// beatPhase shifts the liveness beat onto the Sleeper's multiples of LivenessTicks (under
// h.mu). NewTimeTicker counts its ticks from a wall-clock epoch, so every node of a
// cluster then beats at the same instants, and a node hears its peers' beats while it is
// awake for its own, rather than being woken twice more per beat (by the two peers'
// beats, each at its own phase) in between. A phase that changes (a late tick, the first
// Run) cannot make the beat late: a multiple of LivenessTicks in any phase is reached
// within LivenessTicks of the last beat (beatDue), so it may only come early once.
func (h *Host) beatPhase() uint64 {
	if h.clk.s == nil {
		return 0
	}
	every := uint64(h.cfg.LivenessTicks)
	return (h.clk.base%every + every - h.now%every) % every
}
