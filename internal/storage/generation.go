package storage

import (
	"context"
	"errors"
)

// Generations, for a caller that remembers batches it placed.
//
// A log's generation moves whenever batches it placed and had not yet made
// durable are dropped: a failed group write or sync (everything placed from
// the failed position on), TruncateSuffix, Reset. Offsets of dropped
// batches are given out again. A caller that keeps state about batches when
// it places them, before they are durable — the broker's idempotent-producer
// state records a batch as it places it, so that the producer's next batch
// can be placed while this one syncs — compares Gen with the generation its
// state was made at: if they differ, the state may name dropped batches, and
// the caller rebuilds it from what is durable before deciding anything from
// it. PlaceCheckedAt places only at the generation the caller checked, so a
// batch is never placed on a decision made from state a drop has already
// made stale.

// ErrGenerationChanged is PlaceCheckedAt's refusal: batches were dropped since
// the generation asked for, and nothing was placed.
var ErrGenerationChanged = errors.New("storage: placed batches were dropped since the generation asked for")

// Gen is the log's generation: see above.
func (l *Log) Gen() int64 {
	l.stateMu.Lock()
	defer l.stateMu.Unlock()
	return l.gen
}

// PlaceCheckedAt is PlaceChecked at generation gen only: if the log has moved
// past it, nothing is placed and the error is ErrGenerationChanged.
func (l *Log) PlaceCheckedAt(epoch int32, c Checked, gen int64) (Placed, error) {
	if c.log != l && len(c.batches) > 0 {
		return Placed{}, errForeignChecked
	}
	if len(c.batches) == 0 {
		return Placed{}, nil
	}
	return l.place(c.batches, true, epoch, gen)
}

// WaitDurable waits until everything below end is durable, for batches placed
// at generation gen (by this caller or another one whose Placed it does not
// have: a retry of a batch another request placed). It fails as that
// batch's own Placed.Wait would: if a drop since gen took batches below end
// (ErrTruncated or the failed write's error; the log may hold other batches
// at those offsets by then), if the log failed, or when ctx ends (the
// outcome is then unknown), or if the log closes first (ErrClosed).
func (l *Log) WaitDurable(ctx context.Context, end, gen int64) error {
	return l.waitDurable(ctx, end, gen, nil, true)
}

// PlacedEnd is the offset the next placed batch gets: past everything placed,
// durable or not. Tests use it to see that an append was placed.
func (l *Log) PlacedEnd() int64 {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	return l.next
}
