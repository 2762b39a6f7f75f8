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
			if h.cfg.ObserveRound != nil {
				h.cfg.ObserveRound(time.Since(began))
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
