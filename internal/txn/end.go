package txn

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// EndTxn commits or aborts the producer's transaction: the decision is
// made durable (PrepareCommit or PrepareAbort), then the markers are
// written and the offsets applied, then the transaction is Complete. Once
// the decision is durable the answer is success even if the markers fail:
// Tick writes them later, and the producer waits (CONCURRENT_TRANSACTIONS)
// until they are. A retry of an EndTxn already done succeeds.
func (c *Coordinator) EndTxn(id string, pid int64, epoch int16, commit bool) error {
	c.mu.Lock()
	t, err := c.checkProducerLocked(id, pid, epoch)
	if err != nil {
		return c.unlockSettled(id, err)
	}
	want := PrepareAbort
	if commit {
		want = PrepareCommit
	}
	switch {
	case t.State == CompleteCommit && commit, t.State == CompleteAbort && !commit:
		return c.unlockSettled(id, nil)
	case t.State != Ongoing:
		return c.unlockSettled(id, fmt.Errorf("%w: %s is %v, cannot go to %v", ErrInvalidState, id, t.State, want))
	}
	nt := t.clone()
	nt.State, nt.Updated = want, c.cfg.Now()
	c.decidedLocked(nt)
	if err := c.unlockSettled(id, c.persistLocked(nt)); err != nil {
		return err
	}
	// The answer waits for the markers but not for the Complete record's
	// sync: a crash before it finishes the transaction again at open.
	_ = c.finish(id) // failed: Tick retries; the decision stands
	return nil
}

// finish completes a Prepare state: markers, offsets at commit, Complete.
// Only one runs per id; others return at once.
func (c *Coordinator) finish(id string) error {
	c.mu.Lock()
	t := c.txns[id]
	if c.closed || t == nil || c.busy[id] || !t.State.preparing() {
		c.mu.Unlock()
		return nil
	}
	c.busy[id] = true
	t = t.clone()
	wait := c.pending[id]
	c.mu.Unlock()

	// The decision is durable before anything outside the coordinator
	// acts on it (EndTxn waited already; Tick's timeout aborts did not).
	if wait != nil {
		if err := wait(); err != nil {
			c.mu.Lock()
			delete(c.busy, id)
			c.mu.Unlock()
			return err
		}
	}
	commit := t.State == PrepareCommit
	pid, epoch := t.marker()
	err := c.cfg.Effects.WriteMarkers(Marker{ProducerID: pid, Epoch: epoch, Commit: commit, Seq: t.Seq}, t.Partitions)
	if err == nil && commit && len(t.Offsets) > 0 {
		err = c.cfg.Effects.CommitOffsets(t.Offsets)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.busy, id)
	if err != nil {
		return err
	}
	done := CompleteAbort
	if commit {
		done = CompleteCommit
	}
	nt := c.txns[id].clone()
	nt.reset(done, c.cfg.Now())
	return c.persistLocked(nt)
}

// Tick aborts transactions open past their timeout (bumping the epoch, so
// the producer that went away is fenced) and finishes interrupted
// completions. It returns how many transactions it completed.
func (c *Coordinator) Tick() int {
	c.mu.Lock()
	now := c.cfg.Now()
	var todo []string
	for id, t := range c.txns {
		if c.busy[id] || c.closed {
			continue
		}
		if t.State == Ongoing && now.Sub(t.Started) > t.Timeout {
			if c.abortLocked(t, true) != nil {
				continue
			}
		}
		if c.txns[id].State.preparing() {
			todo = append(todo, id)
		}
	}
	expired := c.expireLocked(now)
	c.mu.Unlock()
	for _, id := range expired {
		_ = c.cfg.Effects.ForgetProducer(id) // a leftover only bumps its next epoch
	}
	slices.Sort(todo)
	n := 0
	for _, id := range todo {
		if c.finish(id) == nil {
			n++
		}
	}
	return n
}

// Verify is KIP-890's check of a transactional produce: the producer's
// epoch is its transactional id's current one and the partition was added
// to its open transaction.
func (c *Coordinator) Verify(pid int64, epoch int16, p Partition) error {
	return settled(c.CheckProduce(pid, epoch, []Partition{p}, false))
}

// CheckProduce is Verify of every partition in parts (implicit false) or
// AddImplicitAll (true) without their wait: the check, and the implicit
// add, are made under the coordinator's lock, and settle returns once the
// state they saw or made is durable (or why it will not be). The broker
// notes the batch as on its way into the partition (so that no marker of
// the transaction passes it) between the two, without holding its
// partition's lock across a sync, and appends the batch only once settled.
func (c *Coordinator) CheckProduce(pid int64, epoch int16, parts []Partition, implicit bool) (settle func() error, err error) {
	c.mu.Lock()
	if implicit {
		err = c.addImplicitLocked(pid, epoch, parts)
	} else {
		for _, p := range parts {
			if err = c.verifyLocked(pid, epoch, p); err != nil {
				break
			}
		}
	}
	wait := c.pending[c.byPID[pid]]
	c.mu.Unlock()
	if wait == nil {
		return settledAlready, err
	}
	return wait, err
}

// settledAlready is the wait of an id with nothing pending: one func, not
// one allocated per produce.
func settledAlready() error { return nil }

// settled is what a CheckProduce's answer is once settled.
func settled(settle func() error, err error) error {
	if werr := settle(); err == nil {
		err = werr
	}
	return err
}

func (c *Coordinator) verifyLocked(pid int64, epoch int16, p Partition) error {
	t, err := c.byProducerLocked(pid)
	if err != nil {
		return err
	}
	switch {
	case epoch != t.Epoch:
		return fmt.Errorf("%w: %s is at epoch %d, the batch has %d", ErrFenced, t.ID, t.Epoch, epoch)
	case t.State != Ongoing || !t.HasPartition(p):
		return fmt.Errorf("%w: %s/%d was not added to the transaction of %s (%v)", ErrInvalidState, p.Topic, p.Partition, t.ID, t.State)
	}
	return nil
}

// byProducerLocked finds the transaction of producer id pid.
func (c *Coordinator) byProducerLocked(pid int64) (*Txn, error) {
	if c.closed {
		return nil, ErrClosed
	}
	id, ok := c.byPID[pid]
	if !ok {
		return nil, fmt.Errorf("%w: producer %d has no transactional id", ErrIDMapping, pid)
	}
	return c.txns[id], nil
}

// Describe returns copies of the transactions of ids; a missing one is
// reported in missing (TRANSACTIONAL_ID_NOT_FOUND).
func (c *Coordinator) Describe(ids []string) (found []Txn, missing []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		if t := c.txns[id]; t != nil {
			found = append(found, *t.clone())
		} else {
			missing = append(missing, id)
		}
	}
	return found, missing
}

// Filter selects transactions for List; empty fields select all.
type Filter struct {
	States      []State
	ProducerIDs []int64
}

// List returns copies of the transactions matching f, by id.
func (c *Coordinator) List(f Filter) []Txn {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Txn
	for _, t := range c.txns {
		if len(f.States) > 0 && !slices.Contains(f.States, t.State) {
			continue
		}
		if len(f.ProducerIDs) > 0 && !slices.Contains(f.ProducerIDs, t.ProducerID) {
			continue
		}
		out = append(out, *t.clone())
	}
	slices.SortFunc(out, func(a, b Txn) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// PendingOffset reports whether an open or completing transaction holds
// an offset for the group's partition: OffsetFetch with require_stable
// answers UNSTABLE_OFFSET_COMMIT then (KIP-447), so a consumer taking the
// partition over does not start from an offset about to change.
func (c *Coordinator) PendingOffset(group, topic string, partition int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.txns {
		if t.State != Ongoing && !t.State.preparing() {
			continue
		}
		for _, o := range t.Offsets {
			if o.Group == group && o.Topic == topic && o.Partition == partition {
				return true
			}
		}
	}
	return false
}

// expireLocked forgets the transactional ids idle past IDExpiration with
// nothing open or completing, durably, and returns them.
func (c *Coordinator) expireLocked(now time.Time) []string {
	var out []string
	for id, t := range c.txns {
		if c.closed || c.busy[id] || t.State == Ongoing || t.State.preparing() || now.Sub(t.Updated) <= c.cfg.IDExpiration {
			continue
		}
		gone := &Txn{ID: id, ProducerID: removed, LastEpoch: -1, Ended: noProducer}
		live := func() []*Txn {
			all := slices.Collect(maps.Values(c.txns))
			return slices.DeleteFunc(all, func(o *Txn) bool { return o.ID == id })
		}
		var err error
		if c.cfg.Store != nil {
			err = c.cfg.Store.Remove(id)
		} else {
			// Not waited for: lost in a crash, the id is forgotten again.
			_, err = c.log.put(gone, live)
		}
		if err != nil {
			return out
		}
		delete(c.txns, id)
		delete(c.byPID, t.ProducerID)
		delete(c.pending, id)
		out = append(out, id)
	}
	return out
}
