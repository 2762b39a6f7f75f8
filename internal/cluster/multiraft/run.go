package multiraft

import (
	"context"
	"time"
)

// Run drives the host until ctx is done, the host is closed or storage fails: a tick per
// Ticker value, and Ready rounds whenever there is work (a proposal, a received batch, a
// tick). With a Sleeper (NewTimeTicker's is one), Run skips the ticks in which no group is
// awake and sleeps to the next one the host needs (sleep.go). It returns ctx's error,
// ErrStopped, or the storage error that stopped it (the node must then restart from what
// its storage holds). One Run per host.
func (h *Host) Run(ctx context.Context, t Ticker) error {
	s, _ := t.(Sleeper)
	var armed uint64 // the Sleeper tick C is armed for; 0: none
	// While a round is stalled on a full disk (diskfull.go) only its retry timer runs a
	// round: a wake-up for a message or a proposal would retry at once, and under load
	// that is a retry per message, not one per backoff.
	var retry *time.Timer
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	var retryC <-chan time.Time
	for {
		if h.isClosed() {
			return ErrStopped
		}
		if s != nil {
			// Re-armed only when the tick wanted changes: under load Run comes here many
			// times a tick, and resetting the timer each time would cost for nothing.
			if n := h.arm(s); n != armed {
				s.Until(n)
				armed = n
			}
		}
		if d := h.stallRetry(); d > 0 && retryC == nil {
			retry = time.NewTimer(d)
			retryC = retry.C
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-retryC:
			retryC = nil
		case <-t.C():
			if s != nil {
				armed = 0
				h.fired(s)
			} else {
				h.Tick()
			}
			if retryC != nil {
				continue
			}
		case <-h.work:
			if s != nil {
				h.woken(s)
			}
			if retryC != nil {
				continue
			}
		}
		// Rounds until no group has work: whatever arrived during a round's sync is
		// taken by the next, which is how many proposals share one sync.
		for {
			began := time.Now()
			worked, err := h.ProcessReady()
			if err != nil {
				return err
			}
			if !worked {
				break
			}
			took := time.Since(began)
			if h.cfg.ObserveRound != nil {
				h.cfg.ObserveRound(took)
			}
			if took >= slowRound {
				h.warnSlowRound(took, time.Now())
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
}

func (h *Host) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

// slowRound is how long a Ready round may take before the host says so: two thirds of the
// slack the liveness beat leaves by default (6 ticks of 50 ms, Config.LivenessTicks), past
// which the node's peers count it down and its groups elect leaders elsewhere.
const slowRound = 200 * time.Millisecond

// slowWarnEvery bounds the warnings about slow rounds to one per interval; the rounds in
// between are counted in the next.
const slowWarnEvery = 10 * time.Second

// roundTrace is where one Ready round's time went (ProcessReady fills it).
type roundTrace struct {
	store   time.Duration // storing snapshots encoded since the last round (encode.go)
	stores  int           // how many it stored
	persist time.Duration // writing the Readys and the engine's sync
	apply   time.Duration // the state machines' applies, snapshots taken in them included
	readys  int           // groups with a Ready
	applied int           // committed entries the round handed to state machines
}

// slowRounds is the slow-round warnings' rate limit.
type slowRounds struct {
	warned time.Time // the last warning
	since  int       // slow rounds not warned about since
}

// warnSlowRound tells the operator a round held every group of the node for took, and
// where the time went, at most once per slowWarnEvery. Ready loop only.
func (h *Host) warnSlowRound(took time.Duration, now time.Time) {
	h.slow.since++
	if !h.slow.warned.IsZero() && now.Sub(h.slow.warned) < slowWarnEvery {
		return
	}
	r := h.round
	h.cfg.Log.Warn("multiraft: a Ready round held every group of this node; past the liveness slack its peers count it down",
		"took", took.Round(time.Millisecond), "persist", r.persist.Round(time.Millisecond),
		"apply", r.apply.Round(time.Millisecond), "store_snapshots", r.store.Round(time.Millisecond),
		"snapshots_stored", r.stores, "readys", r.readys, "entries_applied", r.applied,
		"slow_rounds_since_last_warning", h.slow.since)
	h.slow.warned, h.slow.since = now, 0
}
