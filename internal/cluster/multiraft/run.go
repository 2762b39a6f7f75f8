package multiraft

import "context"

// Run drives the host until ctx is done, the host is closed or storage fails: a tick per
// Ticker value, and Ready rounds whenever there is work (a proposal, a received batch, a
// tick). It returns ctx's error, ErrStopped, or the storage error that stopped it (the node
// must then restart from what its storage holds). One Run per host.
func (h *Host) Run(ctx context.Context, t Ticker) error {
	for {
		if h.isClosed() {
			return ErrStopped
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C():
			h.Tick()
		case <-h.work:
		}
		// Rounds until no group has work: whatever arrived during a round's sync is
		// taken by the next, which is how many proposals share one sync.
		for {
			worked, err := h.ProcessReady()
			if err != nil {
				return err
			}
			if !worked {
				break
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
