package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/internal/group"
	"github.com/sluice-mq/sluice/internal/txn"
)

// Transactions (Kafka's, KIP-98): the coordinator is package txn, durable
// in <Dir>/transactions.log; this file gives it its effects (producer
// epochs from producers.json, markers in the partition logs, offsets in
// the groups) and serves its requests. Each partition's open and aborted
// transactions are txn_partition.go's.

// Re-exported transaction types and errors (package txn).
type (
	TxnPartition = txn.Partition
	TxnOffset    = txn.Offset
	TxnState     = txn.State
	Transaction  = txn.Txn
	TxnFilter    = txn.Filter
	TxnProducer  = txn.Producer
)

var (
	ErrTxnFenced          = txn.ErrFenced
	ErrInvalidTxnState    = txn.ErrInvalidState
	ErrConcurrentTxns     = txn.ErrConcurrent
	ErrTxnIDNotFound      = txn.ErrNotFound
	ErrInvalidPIDMapping  = txn.ErrIDMapping
	ErrInvalidTxnTimeout  = txn.ErrInvalidTimeout
	ErrTxnCoordinatorDown = txn.ErrClosed
	ErrTxnAbortable       = txn.ErrAbortable
	// ErrTxnVersionInCluster: a request of KIP-890 part 2 (EndTxn v5, produce v12,
	// TxnOffsetCommit v5) on a cluster node, which advertises the versions before it.
	ErrTxnVersionInCluster = errors.New("this transaction request version is not served in a cluster (transaction.version 2 is not finalized there)")
)

// ParseTxnState reads a state name.
func ParseTxnState(name string) (TxnState, bool) { return txn.ParseState(name) }

// txnIDPrefix keeps Kafka's transactional ids apart from the native API's
// producer names in producers.json.
const txnIDPrefix = "kafka-txn:"

// txnTickEvery is how often open transactions are checked for their timeout.
const txnTickEvery = time.Second

// openTxn opens the coordinator and finishes the completions a crash
// interrupted (every partition is open by now).
func (s *streams) openTxn() error {
	c, err := txn.Open(txn.Config{FS: s.b.opts.FS, Dir: s.b.opts.Dir, Now: s.b.now,
		MaxTimeout: s.b.opts.TransactionMaxTimeout, Effects: txnEffects{s}})
	if err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	s.txn = c
	c.Tick()
	s.txnStop, s.txnDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(s.txnDone)
		t := time.NewTimer(untilAligned(txnTickEvery))
		defer t.Stop()
		for {
			select {
			case <-s.txnStop:
				return
			case <-t.C:
				c.Tick()
				t.Reset(untilAligned(txnTickEvery))
			}
		}
	}()
	return nil
}

// closeTxn stops the ticker and closes the coordinator, before the
// partitions close.
func (s *streams) closeTxn() error {
	if s.txn == nil {
		return nil
	}
	close(s.txnStop)
	<-s.txnDone
	return s.txn.Close()
}

// txnEffects is what the coordinator does to the rest of the broker.
type txnEffects struct{ s *streams }

func (e txnEffects) InitProducer(id string, floor int16) (int64, int16, error) {
	p, err := e.s.pids.InitAbove(txnIDPrefix+id, floor)
	return p.ID, p.Epoch, err
}

// WriteMarkers writes the partitions' markers in parallel: each is a sync
// of its own log, and the transaction waits for the slowest, not the sum.
func (e txnEffects) WriteMarkers(m txn.Marker, parts []txn.Partition) error {
	pid, epoch, commit := m.ProducerID, m.Epoch, m.Commit
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, tp := range parts {
		_, p, err := e.s.partition(tp.Topic, tp.Partition)
		if err != nil {
			continue // deleted since: nothing left to mark
		}
		wg.Go(func() { errs[i] = e.s.b.writeMarker(p, pid, epoch, commit) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (e txnEffects) ForgetProducer(id string) error {
	return e.s.pids.Forget(txnIDPrefix + id)
}

// CommitOffsets reaches the groups through the streams, not the broker:
// at open (openTxn's first Tick) the broker has no streams yet.
func (e txnEffects) CommitOffsets(offsets []txn.Offset) error {
	g := e.s.groups
	if g == nil {
		return ErrClosed
	}
	byGroup := map[string][]group.OffsetCommit{}
	var order []string
	for _, o := range offsets {
		if _, _, err := e.s.partition(o.Topic, o.Partition); err != nil {
			continue // the topic is gone: its offsets with it
		}
		if byGroup[o.Group] == nil {
			order = append(order, o.Group)
		}
		byGroup[o.Group] = append(byGroup[o.Group], group.OffsetCommit{Topic: o.Topic, Partition: o.Partition,
			Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata})
	}
	if len(order) == 0 {
		return nil
	}
	if err := g.lockChecked(); err != nil {
		return err
	}
	var out group.Output
	for _, id := range order {
		o := g.coord.ApplyTxnOffsets(e.s.b.now(), id, byGroup[id])
		out.Events = append(out.Events, o.Events...)
	}
	durable := g.persistLocked(context.Background(), out)
	g.mu.Unlock()
	return durable()
}

// coordinator returns the transaction coordinator, or why there is none.
func (b *Broker) coordinator() (*txn.Coordinator, error) {
	if b.cluster != nil {
		return b.cluster.txn.ready() // the controller's (cluster_txn.go)
	}
	if b.streams == nil || b.streams.txn == nil {
		return nil, ErrTxnCoordinatorDown
	}
	return b.streams.txn, nil
}

// TxnLogStats reports a single node's transaction coordinator log
// (transactions.log); false on a cluster node or before the coordinator
// is open.
func (b *Broker) TxnLogStats() (txn.LogStats, bool) {
	if b.cluster != nil || b.streams == nil || b.streams.txn == nil {
		return txn.LogStats{}, false
	}
	return b.streams.txn.LogStats()
}

// InitTransactionalProducer is InitProducerId with a transactional id:
// the id's producer id at a new epoch, fencing the previous instance and
// aborting what it left open. expect (ID -1: none) is KIP-360's re-init.
func (b *Broker) InitTransactionalProducer(id string, timeout time.Duration, expect TxnProducer) (ProducerID, error) {
	c, err := b.coordinator()
	if err != nil {
		return ProducerID{}, err
	}
	p, err := c.InitProducerID(id, timeout, expect)
	return ProducerID{ID: p.ID, Epoch: p.Epoch}, err
}

// AddPartitionsToTxn adds partitions to the transaction: errs, aligned
// with parts, refuses partitions that do not exist; err refuses all.
func (b *Broker) AddPartitionsToTxn(id string, pid int64, epoch int16, parts []TxnPartition) ([]error, error) {
	c, err := b.coordinator()
	if err != nil {
		return nil, err
	}
	errs := make([]error, len(parts))
	var ok []txn.Partition
	for i, tp := range parts {
		if _, _, errs[i] = b.streams.partition(tp.Topic, tp.Partition); errs[i] == nil && b.cluster != nil {
			errs[i] = b.cluster.txn.replicated(tp)
		}
		if errs[i] == nil {
			ok = append(ok, tp)
		}
	}
	if len(ok) < len(parts) {
		// Kafka adds none when one is unknown: the others answer
		// OPERATION_NOT_ATTEMPTED.
		return errs, nil
	}
	return errs, c.AddPartitions(id, pid, epoch, ok)
}

// VerifyTxnPartitions answers, without changing anything, whether each
// partition is in the producer's open transaction (AddPartitionsToTxn
// v4's verifyOnly, KIP-890).
func (b *Broker) VerifyTxnPartitions(pid int64, epoch int16, parts []TxnPartition) ([]error, error) {
	c, err := b.coordinator()
	if err != nil {
		return nil, err
	}
	errs := make([]error, len(parts))
	for i, tp := range parts {
		errs[i] = c.Verify(pid, epoch, tp)
	}
	return errs, nil
}

// AddTxnPartitionsImplicit adds the partitions a transactional produce
// v12+ request writes to its producer's transaction in one durable step
// before they are appended (KIP-890 part 2). Only a saving: each
// partition's append still adds and checks its own partition, and answers
// its own error; partitions that do not exist are left out.
func (b *Broker) AddTxnPartitionsImplicit(pid int64, epoch int16, parts []TxnPartition) error {
	if b.cluster != nil {
		return ErrTxnVersionInCluster
	}
	c, err := b.coordinator()
	if err != nil {
		return err
	}
	ok := parts[:0:0]
	for _, tp := range parts {
		if _, _, err := b.streams.partition(tp.Topic, tp.Partition); err == nil {
			ok = append(ok, tp)
		}
	}
	if len(ok) == 0 {
		return nil
	}
	return c.AddImplicitAll(pid, epoch, ok)
}

// AddOffsetsToTxn adds a group to the transaction (AddOffsetsToTxn).
func (b *Broker) AddOffsetsToTxn(id string, pid int64, epoch int16, groupID string) error {
	return b.addOffsetsToTxn(id, pid, epoch, groupID, false)
}

// AddOffsetsToTxnAbortable is AddOffsetsToTxn v4+, which knows
// TRANSACTION_ABORTABLE (ErrTxnAbortable).
func (b *Broker) AddOffsetsToTxnAbortable(id string, pid int64, epoch int16, groupID string) error {
	return b.addOffsetsToTxn(id, pid, epoch, groupID, true)
}

func (b *Broker) addOffsetsToTxn(id string, pid int64, epoch int16, groupID string, abortable bool) error {
	c, err := b.coordinator()
	if err != nil {
		return err
	}
	if groupID == "" {
		return ErrInvalidGroupID
	}
	if abortable {
		return c.AddGroupAbortable(id, pid, epoch, groupID)
	}
	return c.AddGroup(id, pid, epoch, groupID)
}

// TxnOffsetCommit checks offsets as a commit of the member would be
// checked and holds them in the transaction until it commits. implicit
// (TxnOffsetCommit v5+, KIP-890 part 2) adds the group to the transaction
// itself, as AddOffsetsToTxn would have.
func (b *Broker) TxnOffsetCommit(id string, pid int64, epoch int16, req group.CommitRequest, implicit bool) error {
	if b.cluster != nil && implicit {
		return ErrTxnVersionInCluster
	}
	c, err := b.coordinator()
	if err != nil {
		return err
	}
	if b.cluster != nil {
		// The group coordinator is this same controller: ready, its members' generations
		// those of this term, before the commit is checked against them.
		ctx, cancel := context.WithTimeout(context.Background(), coordinatorReadyTimeout)
		err := b.CheckCoordinator(ctx)
		cancel()
		if err != nil {
			return err
		}
	}
	for _, o := range req.Offsets {
		if _, _, err := b.streams.partition(o.Topic, o.Partition); err != nil {
			return err
		}
	}
	g, err := b.groups()
	if err != nil {
		return err
	}
	if err := g.lockChecked(); err != nil {
		return err
	}
	err = g.coord.CheckTxnCommit(b.now(), req)
	g.mu.Unlock()
	if err != nil {
		return err
	}
	offs := make([]txn.Offset, len(req.Offsets))
	for i, o := range req.Offsets {
		offs[i] = txn.Offset{Group: req.Group, Topic: o.Topic, Partition: o.Partition, Offset: o.Offset,
			LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata}
	}
	if implicit {
		return c.CommitOffsetsImplicit(id, pid, epoch, offs)
	}
	return c.CommitOffsets(id, pid, epoch, offs)
}

// EndTxn commits or aborts the transaction.
func (b *Broker) EndTxn(id string, pid int64, epoch int16, commit bool) error {
	c, err := b.coordinator()
	if err != nil {
		return err
	}
	return c.EndTxn(id, pid, epoch, commit)
}

// EndTxnBump is EndTxn v5 (KIP-890 part 2): the epoch is bumped at the
// end of every transaction, and the producer id and epoch to use next
// are returned.
func (b *Broker) EndTxnBump(id string, pid int64, epoch int16, commit bool) (TxnProducer, error) {
	if b.cluster != nil {
		return TxnProducer{ID: -1, Epoch: -1}, ErrTxnVersionInCluster
	}
	c, err := b.coordinator()
	if err != nil {
		return TxnProducer{ID: -1, Epoch: -1}, err
	}
	return c.EndTxnBump(id, pid, epoch, commit)
}

// DescribeTransactions returns the named transactions; missing ones are
// listed apart.
func (b *Broker) DescribeTransactions(ids []string) ([]Transaction, []string, error) {
	c, err := b.coordinator()
	if err != nil {
		return nil, nil, err
	}
	found, missing := c.Describe(ids)
	return found, missing, nil
}

// ListTransactions lists transactions matching f. In a cluster a node that is not the
// controller coordinates none, and lists none (Kafka's ListTransactions asks every
// broker for its own).
func (b *Broker) ListTransactions(f TxnFilter) ([]Transaction, error) {
	c, err := b.coordinator()
	if errors.Is(err, ErrNotCoordinator) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return c.List(f), nil
}

// TickTransactions aborts timed-out transactions now (tests with a fake
// clock; the broker runs it every second itself).
func (b *Broker) TickTransactions() int {
	c, err := b.coordinator()
	if err != nil {
		return 0
	}
	return c.Tick()
}

// PendingTxnOffset reports whether a transaction not yet complete holds an
// offset for the group's partition (OffsetFetch's require_stable).
func (b *Broker) PendingTxnOffset(groupID, topic string, partition int32) bool {
	c, err := b.coordinator()
	return err == nil && c.PendingOffset(groupID, topic, partition)
}
