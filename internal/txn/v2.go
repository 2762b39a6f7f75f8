package txn

import (
	"fmt"
	"math"
	"slices"
)

// KIP-890 part 2 ("transaction version 2"): the coordinator bumps the
// producer epoch at every EndTxn v5 and answers the new one, so each
// transaction is its own (producer id, epoch) and anything late from the
// previous one is fenced; a produce v12+ adds its partition to the
// transaction itself (AddImplicit) and a TxnOffsetCommit v5+ its group
// (CommitOffsetsImplicit). Older request versions keep KIP-98's rules.

// EndTxnBump is EndTxn v5: it commits or aborts like EndTxn, bumping the
// epoch in the same durable step as the decision (the markers carry the
// bumped epoch and the id the batches carry), and returns the producer id
// and epoch of the next transaction. The epoch running out gives the
// transactional id a new producer id at epoch 0. Also:
//   - an abort with nothing open succeeds and bumps (a client that tried
//     produces, none acknowledged, clears what they may have registered);
//   - a retry of the EndTxn that ended the last transaction (its old
//     epoch, the same decision) succeeds with the current producer;
//   - an EndTxn at the epoch a timeout abort bumped away is answered like
//     that retry if it aborts, ErrAbortable if it commits.
func (c *Coordinator) EndTxnBump(id string, pid int64, epoch int16, commit bool) (Producer, error) {
	c.mu.Lock()
	t, err := c.endableLocked(id, pid, epoch, commit)
	if err != nil || t == nil {
		cur := c.current(id)
		return cur, c.unlockSettled(id, err)
	}
	want := PrepareAbort
	if commit {
		want = PrepareCommit
	}
	switch {
	case t.State == Ongoing:
	case !commit: // nothing open: an abort bumps only
		want = CompleteAbort
	default:
		return Producer{}, c.unlockSettled(id, fmt.Errorf("%w: %s is %v, nothing to commit", ErrInvalidState, id, t.State))
	}
	nt := t.clone()
	npid, nepoch, err := c.bump(t)
	if err != nil {
		return Producer{}, c.unlockSettled(id, err)
	}
	nt.Ended = Producer{ID: t.ProducerID, Epoch: t.Epoch}
	nt.ProducerID, nt.Epoch, nt.LastEpoch = npid, nepoch, -1
	if want == CompleteAbort {
		nt.reset(CompleteAbort, c.cfg.Now())
	} else {
		nt.State, nt.Updated = want, c.cfg.Now()
		c.decidedLocked(nt)
	}
	if err := c.unlockSettled(id, c.persistLocked(nt)); err != nil {
		return Producer{}, err
	}
	_ = c.finish(id) // failed: Tick retries; the decision stands
	return Producer{ID: npid, Epoch: nepoch}, nil
}

// bump is EndTxn v5's next epoch. It is made durable by the caller's
// write of the transaction (its PrepareCommit or PrepareAbort record), not
// in the producer ids' file, which a sync per transaction would cost:
// Effects.InitProducer is told the epoch reached (its floor) at the next
// InitProducerId or timeout abort. Only past the last epoch does it ask
// Effects for a fresh producer id.
func (c *Coordinator) bump(t *Txn) (int64, int16, error) {
	if t.Epoch < math.MaxInt16 {
		return t.ProducerID, t.Epoch + 1, nil
	}
	return c.cfg.Effects.InitProducer(t.ID, math.MaxInt16)
}

// current is the producer id and epoch id holds now. Called with mu held.
func (c *Coordinator) current(id string) Producer {
	if t := c.txns[id]; t != nil {
		return Producer{ID: t.ProducerID, Epoch: t.Epoch}
	}
	return noProducer
}

// endableLocked checks an EndTxn v5: the transaction to end, or nil and
// no error when the request is a retry already answered (the caller
// returns the current producer), or why not.
func (c *Coordinator) endableLocked(id string, pid int64, epoch int16, commit bool) (*Txn, error) {
	if c.closed {
		return nil, ErrClosed
	}
	t := c.txns[id]
	if t == nil {
		return nil, fmt.Errorf("%w: %s, producer %d", ErrIDMapping, id, pid)
	}
	done := CompleteAbort
	if commit {
		done = CompleteCommit
	}
	if e := t.Ended; e.ID >= 0 && e.ID == pid && e.Epoch == epoch {
		// The EndTxn that ended the last transaction, again.
		switch {
		case t.State.preparing() || c.busy[id]:
			if (t.State == PrepareCommit) != commit {
				return nil, fmt.Errorf("%w: %s is %v", ErrInvalidState, id, t.State)
			}
			return nil, ErrConcurrent
		case t.State == done:
			return nil, nil
		}
		return nil, fmt.Errorf("%w: %s at epoch %d ended as %v", ErrInvalidState, id, epoch, t.State)
	}
	if t.ProducerID == pid && t.bumpedAway(epoch) {
		if commit {
			return nil, fmt.Errorf("%w: %s was aborted at its timeout", ErrAbortable, id)
		}
		if t.State.preparing() || c.busy[id] {
			return nil, ErrConcurrent
		}
		return nil, nil // the abort the producer asks for is done
	}
	return c.checkLocked(id, pid, epoch, true)
}

// AddImplicit is a transactional produce v12+ (KIP-890 part 2): it
// checks the batch's producer like Verify and adds the partition to the
// producer's transaction, beginning one if none is open, durably before
// the batch is appended. A producer bumped away by a timeout abort is
// told ErrAbortable.
func (c *Coordinator) AddImplicit(pid int64, epoch int16, p Partition) error {
	return c.AddImplicitAll(pid, epoch, []Partition{p})
}

// AddImplicitAll is AddImplicit for every partition of one produce
// request in one durable write, done before the request's partitions are
// appended (each of which then finds its partition added): one sync per
// request rather than one per partition.
func (c *Coordinator) AddImplicitAll(pid int64, epoch int16, parts []Partition) error {
	return settled(c.CheckProduce(pid, epoch, parts, true))
}

func (c *Coordinator) addImplicitLocked(pid int64, epoch int16, parts []Partition) error {
	t, err := c.byProducerLocked(pid)
	if err != nil {
		return err
	}
	if t, err = c.checkLocked(t.ID, pid, epoch, true); err != nil {
		return err
	}
	if t.State == Ongoing && !slices.ContainsFunc(parts, func(p Partition) bool { return !t.HasPartition(p) }) {
		return nil
	}
	nt := c.begin(t)
	for _, p := range parts {
		nt.addPartition(p)
	}
	return c.persistLocked(nt)
}
