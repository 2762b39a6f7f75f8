package broker

// Kafka transactions in a cluster (docs/cluster.md, "Transactions").
//
// The controller (the metadata group's leader) coordinates every transactional id, as it
// coordinates consumer groups: FindCoordinator names it, and other nodes answer
// NOT_COORDINATOR. Its txn.Coordinator keeps no file: each record (the whole state of one
// transactional id) is an OpSetTxn entry of the metadata group (meta/txns.go), committed
// before the change is visible or answered, so every node holds every transaction in its
// catalog. A node that becomes controller commits a barrier, builds its coordinator from
// those records, and its first tick finishes what was prepared (markers, offsets,
// Complete): a commit accepted stays a commit, an abort an abort. The records' entries
// carry the coordinator's term, and apply refuses one of another term, so a coordinator
// that lost leadership can never write over what a newer one decided.
//
// Markers are written by each partition's leader, asked by the coordinator over the
// cluster transport (cluster_txn_markers.go); produce verification runs on the partition's
// leader against its copy of the records (cluster_txn_verify.go).

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/txn"
)

// txnPutTimeout bounds one record's commit; its outcome is then unknown, and the
// coordinator is rebuilt from the log before it answers again.
const txnPutTimeout = 10 * time.Second

// clusterTxn is the cluster side of the transaction coordinator on one node.
type clusterTxn struct {
	b   *Broker
	cat *meta.Catalog
	sm  *meta.Machine
	// ctx ends when the broker closes: what the coordinator waits for (a barrier, a
	// record's commit, markers) stops waiting then.
	ctx context.Context

	mu    sync.Mutex // guards coord and term; held while a coordinator is built
	coord *txn.Coordinator
	term  uint64 // the term coord was built in; 0: none
	// broken is a term whose coordinator must be rebuilt (a record's commit failed under
	// it). Atomic, not under mu: the store sets it with the coordinator's lock held, and
	// ready holds mu while it closes a coordinator, which takes that lock.
	broken atomic.Uint64

	vmu  sync.Mutex
	view *txnView // the last decoded view of the records (cluster_txn_verify.go)

	// beforeMarkers, when set (tests), runs as a completion starts writing its markers:
	// its decision is committed, nothing is marked yet.
	beforeMarkers atomic.Pointer[func()]
}

func newClusterTxn(ctx context.Context, b *Broker, o *ClusterOptions) *clusterTxn {
	return &clusterTxn{ctx: ctx, b: b, cat: o.Catalog, sm: o.Meta}
}

// ready returns the coordinator of this term, building it first if needed; on a node
// that is not the controller, a *NotCoordinatorError.
func (ct *clusterTxn) ready() (*txn.Coordinator, error) {
	term, leader := ct.cat.Term()
	if !leader {
		ct.drop()
		return nil, ct.notCoordinator()
	}
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.coord != nil && ct.term == term && ct.broken.Load() != term {
		return ct.coord, nil
	}
	if ct.coord != nil {
		ct.coord.Close()
		ct.coord, ct.term = nil, 0
	}
	ctx, cancel := context.WithTimeout(ct.ctx, coordinatorReadyTimeout)
	defer cancel()
	// Once applied here, so is every record committed before this term.
	if err := ct.cat.ProposeGroupOffsets(ctx, nil); err != nil {
		return nil, ct.mapErr(err)
	}
	st := ct.sm.State()
	var initial []*txn.Txn
	for _, id := range slices.Sorted(maps.Keys(st.Txns)) {
		t, err := txn.DecodeTxn(st.Txns[id].Record)
		if err != nil {
			return nil, fmt.Errorf("%w: transaction record of %q: %w", ErrCoordinatorNotAvailable, id, err)
		}
		initial = append(initial, t)
	}
	if t, l := ct.cat.Term(); !l || t != term {
		return nil, ct.notCoordinator()
	}
	store := &metaTxnStore{ct: ct, term: term}
	c, err := txn.Open(txn.Config{Now: ct.b.now, MaxTimeout: ct.b.opts.TransactionMaxTimeout,
		Effects: clusterTxnEffects{ct: ct}, Store: store, Initial: initial})
	if err != nil {
		return nil, err
	}
	ct.broken.CompareAndSwap(term, 0)
	ct.coord, ct.term = c, term
	return c, nil
}

// replicated refuses a partition the catalog does not have: a topic this node had before
// it joined the cluster is its own, and no leader would write its markers.
func (ct *clusterTxn) replicated(tp txn.Partition) error {
	t := ct.sm.State().Topics[tp.Topic]
	if t == nil || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
		return fmt.Errorf("%w: %s/%d is this node's own, not the cluster's: it cannot be in a transaction",
			ErrUnknownPartition, tp.Topic, tp.Partition)
	}
	return nil
}

// drop closes the coordinator of a term this node no longer leads: its memory may be
// stale, and its writes would be refused anyway.
func (ct *clusterTxn) drop() {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.coord != nil {
		ct.coord.Close()
		ct.coord, ct.term = nil, 0
	}
}

// invalidate makes the next request rebuild the coordinator of term from the log: a
// record's commit failed or its outcome is unknown, so memory and log may differ.
func (ct *clusterTxn) invalidate(term uint64) { ct.broken.Store(term) }

func (ct *clusterTxn) notCoordinator() error {
	return &NotCoordinatorError{Coordinator: int32(ct.cat.Leader())}
}

func (ct *clusterTxn) mapErr(err error) error {
	if errors.Is(err, meta.ErrNotLeader) || errors.Is(err, meta.ErrStaleTxnCoordinator) {
		return ct.notCoordinator()
	}
	return fmt.Errorf("%w: %w", ErrCoordinatorNotAvailable, err)
}

// loop ticks the coordinator while this node is the controller: transactions past their
// timeout are aborted, and completions a failover or a partition leader's absence
// interrupted are finished. On other nodes it drops any coordinator it held.
func (ct *clusterTxn) loop(ctx context.Context) {
	t := time.NewTimer(untilAligned(txnTickEvery))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			ct.drop()
			return
		case <-t.C:
		}
		if c, err := ct.ready(); err == nil {
			c.Tick()
		}
		t.Reset(untilAligned(txnTickEvery))
	}
}

// metaTxnStore is a coordinator's txn.Store: each record an OpSetTxn entry of its term.
type metaTxnStore struct {
	ct   *clusterTxn
	term uint64
}

// Put proposes the record and returns at once: the coordinator waits for the commit
// outside its lock, so the records of transactions running at once share Raft rounds
// (one metadata-group append and fsync for many) rather than each waiting its turn. The
// commit is awaited here, by a goroutine of its own, whether or not the coordinator ever
// asks (it does not for a Complete record): the catalog keeps a result only until 1,024
// newer ones pushed it out, and a wait that came later would find its outcome unknown.
func (s *metaTxnStore) Put(t *txn.Txn) (func() error, error) {
	wait, err := s.ct.cat.PutTxnAsync(s.term, t.ID, txn.EncodeTxn(t))
	if err != nil {
		s.ct.invalidate(s.term)
		return nil, s.ct.mapErr(err)
	}
	done := make(chan struct{})
	var werr error
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(s.ct.ctx, txnPutTimeout)
		defer cancel()
		if _, err := wait(ctx); err != nil {
			s.ct.invalidate(s.term)
			werr = s.ct.mapErr(err)
		}
	}()
	return func() error {
		<-done
		return werr
	}, nil
}

func (s *metaTxnStore) Remove(id string) error {
	ctx, cancel := context.WithTimeout(s.ct.ctx, txnPutTimeout)
	defer cancel()
	if _, err := s.ct.cat.PutTxn(ctx, s.term, id, nil); err != nil {
		s.ct.invalidate(s.term)
		return s.ct.mapErr(err)
	}
	return nil
}

// clusterTxnEffects is what the controller's coordinator does to the rest of the cluster.
type clusterTxnEffects struct{ ct *clusterTxn }

// InitProducer keeps a transactional id's producer id across controllers (its record
// holds it) and moves its epoch above floor and the record's; a fresh id (the node's own
// allocation, its node id in the high bits) only for a new transactional id or past the
// last epoch.
func (e clusterTxnEffects) InitProducer(id string, floor int16) (int64, int16, error) {
	if r, ok := e.ct.sm.State().Txns[id]; ok {
		if t, err := txn.DecodeTxn(r.Record); err == nil && t.ProducerID >= 0 {
			if cur := max(floor, t.Epoch); cur < math.MaxInt16 {
				return t.ProducerID, cur + 1, nil
			}
		}
	}
	p, err := e.ct.b.InitProducerID("")
	return p.ID, 0, err
}

// WriteMarkers has each partition's leader write the marker, carrying the transaction's
// Seq in its coordinator epoch (cluster_txn_markers.go).
func (e clusterTxnEffects) WriteMarkers(m txn.Marker, parts []txn.Partition) error {
	if f := e.ct.beforeMarkers.Load(); f != nil {
		(*f)()
	}
	return e.ct.b.writeClusterMarkers(e.ct.ctx, m.ProducerID, m.Epoch, m.Commit, int32(m.Seq), parts)
}

// CommitOffsets applies a committed transaction's offsets as the group coordinator's
// commit: one group-offsets entry of the metadata group, on this same controller.
func (e clusterTxnEffects) CommitOffsets(offsets []txn.Offset) error {
	ctx, cancel := context.WithTimeout(e.ct.ctx, coordinatorReadyTimeout)
	defer cancel()
	if err := e.ct.b.CheckCoordinator(ctx); err != nil {
		return err
	}
	return txnEffects{e.ct.b.streams}.CommitOffsets(offsets)
}

// ForgetProducer has nothing to do: no producer id is kept outside the records.
func (e clusterTxnEffects) ForgetProducer(string) error { return nil }
