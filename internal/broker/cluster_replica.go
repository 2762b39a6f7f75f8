package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/replpart"
	"github.com/sluice-mq/sluice/internal/producer"
	"github.com/sluice-mq/sluice/internal/storage"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// hostedReplica is a partition's Raft group on this node.
type hostedReplica struct {
	part     *replpart.Partition
	sm       *replpart.Machine // its state machine here: the subscriptions' cursors (cluster_subs_host.go)
	log      *replicaLog       // the local log as sm sees it
	group    multiraft.GroupID
	replicas []multiraft.NodeID
	// movingDead: a mover copies its subscriptions' dead letters (cluster_subs_dlq.go).
	movingDead atomic.Bool
	// staleRefused counts, per subscription id, the receipts this node refused as stale
	// while it led the partition (*atomic.Uint64; one entry per subscription that had one).
	staleRefused sync.Map
}

// countStale counts one stale receipt of subscription sub refused here.
func (h *hostedReplica) countStale(sub uint64) {
	n, _ := h.staleRefused.LoadOrStore(sub, new(atomic.Uint64))
	n.(*atomic.Uint64).Add(1)
}

// staleOf is how many stale receipts of subscription sub were refused here.
func (h *hostedReplica) staleOf(sub uint64) uint64 {
	if n, ok := h.staleRefused.Load(sub); ok {
		return n.(*atomic.Uint64).Load()
	}
	return 0
}

// replicaLog is a partition's local log as its Raft group's state machine sees it
// (replpart.Log). Apply runs on every replica in log order, so everything it decides —
// offsets, an idempotent producer's duplicate or gap — comes out the same everywhere.
type replicaLog struct {
	b *Broker
	p *partitionRT
	// appliedEnd is where the log ended after the last Restore or Apply (Ready loop only;
	// -1 before the first Restore). Records past it that Apply finds were pulled by a
	// snapshot's preparation (AppendRange) for a snapshot raft then did not take: it found
	// the snapshot's entry in its own log and moved its commit index instead, so those
	// very entries are applied here next. Apply cuts them first, or they would be stored
	// twice and every later offset would differ from the other replicas'.
	appliedEnd int64
	// withState reports whether checkpoints may carry the producer and transaction state
	// (the cluster's feature level admits them; nil: never).
	withState func() bool
	// prodUndo and txnUndo keep what the entry being applied changed, for cutBack.
	prodUndo producer.Undo
	txnUndo  txnUndo
	// stateKept: the last checkpoint taken or restored carries the producer and
	// transaction state (or is the empty log's, which has none to carry). Set on the
	// Ready loop, read by the reconcile loop's refreshCheckpoints.
	stateKept atomic.Bool
	// refreshAsked is when refreshCheckpoints last asked for an entry to checkpoint after
	// (unix nanoseconds; 0: never).
	refreshAsked atomic.Int64
	// scans counts the Restores that rebuilt the state from the log, for lack of it in
	// the checkpoint.
	scans atomic.Int32
}

// Apply appends one committed entry's batches, stamped with term as their leader epoch,
// without an fsync: the entry is durable in the Raft log, and Restore cuts this log back
// to its last checkpoint after a crash. The entry's bytes belong to Raft (the host may
// serve the same slice to the transport and to later reads) and are only read here:
// storage.Log stamps offsets and the epoch into its own copy of what it appends, never
// into the caller's slices, so they are not copied first.
func (r *replicaLog) Apply(term uint64, raws [][]byte) ([]replpart.BatchResult, error) {
	p := r.p
	if err := r.dropUnapplied(); err != nil {
		return nil, err
	}
	defer func() { r.appliedEnd = p.log.HighWatermark() }()
	out := make([]replpart.BatchResult, len(raws))
	checked, err := p.log.Check(raws...)
	if err != nil {
		// The leader checked these very bytes, so every replica refuses them alike.
		for i := range out {
			out[i].Err = batchErr(err)
		}
		return out, nil
	}
	epoch := int32(term) // raftstore refuses terms past int32 (ErrTermTooLarge)
	hs := make([]batch.Header, len(raws))
	for i := range raws {
		hs[i], _ = batch.ParseHeader(raws[i])
	}
	start := p.log.HighWatermark()
	r.prodUndo.Reset()
	r.txnUndo.reset()
	if err := r.appendLocked(epoch, hs, checked, out); err != nil {
		if vfs.NoSpace(err) {
			// The entry is applied again once there is room (replpart.Log's contract):
			// what of it was appended goes, and the producer and transaction state noted
			// for it with it.
			if cerr := r.cutBack(start); cerr != nil {
				return nil, fmt.Errorf("partition %s/%d: %w (and cutting back the entry: %w)", p.topic, p.index, err, cerr)
			}
		}
		return nil, err
	}
	// Only once p.prod is released: notifySubs takes the topic's lock, and topicRT.close
	// holds that lock while it takes each partition's p.prod (the order is topic, then
	// partition). Holding p.prod here deadlocked a broker closed while its Ready loop was
	// in an Apply (TestReplicaApplyNeverHoldsProducerLockForTopic).
	p.owner.notifySubs()
	return out, nil
}

// appendLocked appends raws, whose headers are hs, under the partition's producer lock
// (idempotent batches are checked and recorded there), and fills in out.
func (r *replicaLog) appendLocked(epoch int32, hs []batch.Header, checked storage.Checked, out []replpart.BatchResult) error {
	p := r.p
	p.prod.Lock()
	defer p.prod.Unlock()
	ctx := context.Background()
	for i := 0; i < len(hs); {
		if hs[i].ProducerID < 0 {
			j := i + 1
			for j < len(hs) && hs[j].ProducerID < 0 {
				j++
			}
			offs, err := p.log.AppendChecked(ctx, epoch, checked.Slice(i, j))
			if err != nil {
				return fmt.Errorf("partition %s/%d: %w", p.topic, p.index, err)
			}
			for k, off := range offs {
				out[i+k].Base = off
			}
			i = j
			continue
		}
		if hs[i].Control() {
			// A transaction marker, proposed by the partition's leader for the
			// coordinator (cluster_txn_markers.go): not a producer's batch, no sequence.
			if err := r.applyMarker(epoch, checked.Batch(i), checked.Slice(i, i+1), &out[i]); err != nil {
				return err
			}
			i++
			continue
		}
		dup, err := p.prod.CheckLocked(hs[i])
		switch {
		case err != nil:
			out[i].Err = err
		case dup != nil:
			out[i].Base, out[i].Duplicate = dup.Base, true
		default:
			if hs[i].Transactional() {
				// Registered before the append, at the offset it lands at: the last stable
				// offset never passes an open record, on every replica alike.
				p.txn.noteOpenKept(&r.txnUndo, hs[i].ProducerID, p.log.HighWatermark())
			}
			offs, err := p.log.AppendChecked(ctx, epoch, checked.Slice(i, i+1))
			if err != nil {
				return fmt.Errorf("partition %s/%d: %w", p.topic, p.index, err)
			}
			p.prod.KeepLocked(&r.prodUndo, hs[i].ProducerID)
			p.prod.RecordLocked(hs[i], offs[0])
			out[i].Base = offs[0]
		}
		i++
	}
	return nil
}

// Checkpoint syncs the local log; its high watermark is where Restore comes back to, its
// log start where a replica that lacks the records starts its pull, and (at
// meta.LevelPartitionState) the producer and transaction state at that high watermark is
// what the replica restoring it decides the later entries with (cluster_replica_state.go).
// A start a trim raised (cluster_delete_records.go) is named but not kept yet: that waits
// for the snapshot holding the checkpoint to be stored (CheckpointStored).
func (r *replicaLog) Checkpoint() ([]byte, error) {
	if err := r.p.log.Sync(); err != nil {
		return nil, err
	}
	withState := r.withState != nil && r.withState()
	r.stateKept.Store(withState)
	return r.encodeCheckpoint(withState), nil
}

var (
	_ replpart.CheckpointCapturer = (*replicaLog)(nil)
	_ replpart.CheckpointKeeper   = (*replicaLog)(nil)
)

// CaptureCheckpoint is Checkpoint with the local log's sync left to persist, which the
// snapshot's encoding runs off the Ready loop (replpart/capture.go): the checkpoint names
// the high watermark and log start as of now, and the sync makes at least that durable.
func (r *replicaLog) CaptureCheckpoint() ([]byte, func() error, error) {
	withState := r.withState != nil && r.withState()
	r.stateKept.Store(withState)
	return r.encodeCheckpoint(withState), r.p.log.Sync, nil
}

// CheckpointStored keeps the log start a stored snapshot's checkpoint names, if a trim
// raised it (storage.Log.PersistStartUpTo: never a start raised after the checkpoint),
// and deletes the segments below it. Before the snapshot is stored, a crash restarts from
// the one before, and the entries applied again before the trim must find the records
// they found the first time; after, a restart restores this checkpoint, whose start
// Restore raises again if the disk did not keep it. So a failure here costs disk space
// until the next stored snapshot, not a record: it is logged, and the next one tries again.
func (r *replicaLog) CheckpointStored(data []byte) {
	p := r.p
	cp, err := decodeCheckpoint(data)
	if err == nil {
		err = p.log.PersistStartUpTo(cp.start)
	}
	if err != nil {
		r.b.log.Warn("a partition's log start raised by DeleteRecords could not be kept yet; the next snapshot tries again",
			"topic", p.topic, "partition", p.index, "err", err)
	}
}

// Restore cuts the local log back to a checkpoint (nil: empty) and takes the producer
// state it carries (or, from a checkpoint without it, rebuilds that from what remains);
// the host then applies the entries after it again. A log that ends before the checkpoint
// answers *replpart.BehindError: replpart pulls the records from a peer (AppendRange) and
// calls Restore again.
func (r *replicaLog) Restore(data []byte) error {
	p := r.p
	cp, err := decodeCheckpoint(data)
	if err != nil {
		return fmt.Errorf("partition %s/%d: %w", p.topic, p.index, err)
	}
	hw, start := cp.hw, cp.start
	switch cur := p.log.HighWatermark(); {
	case cur > hw && hw <= p.log.LogStartOffset():
		if err := p.log.Reset(hw); err != nil {
			return err
		}
	case cur > hw:
		if err := p.log.TruncateSuffix(hw); err != nil {
			return err
		}
	case cur < hw:
		// The records between are below the snapshot, in no Raft entry this replica
		// will be sent (a new replica, a wiped log, a follower past the compacted Raft
		// log): they come from a peer's local log. Below the checkpoint's log start
		// there is nothing to pull: the log restarts there.
		if cur < start {
			if err := p.log.Reset(start); err != nil {
				return err
			}
			cur = start
		}
		if cur < hw {
			return &replpart.BehindError{From: cur, To: hw}
		}
	}
	// A start a trim raised before the checkpoint, which the disk may not have kept yet
	// (CheckpointStored): raised again, so that what DeleteRecords answered as deleted
	// stays deleted, before any state is rebuilt from what the log holds.
	if start > p.log.LogStartOffset() && start <= p.log.HighWatermark() {
		if _, err := p.log.RaiseStart(start); err != nil {
			return fmt.Errorf("partition %s/%d: %w", p.topic, p.index, err)
		}
	}
	if cp.state {
		if err := r.restoreState(cp); err != nil {
			return fmt.Errorf("partition %s/%d: %w", p.topic, p.index, err)
		}
	} else {
		r.rebuildProducers()
		r.scans.Add(1)
	}
	r.stateKept.Store(cp.state || len(data) == 0)
	r.appliedEnd = p.log.HighWatermark()
	return nil
}

// dropUnapplied cuts records a snapshot's preparation pulled past what was applied (see
// appliedEnd). The producer and transaction state stays: pulled records never reached it,
// so it is the state of what was applied (a rebuild from the log would lose what the log
// no longer holds).
func (r *replicaLog) dropUnapplied() error {
	p := r.p
	end := p.log.HighWatermark()
	if r.appliedEnd < 0 || end == r.appliedEnd {
		return nil
	}
	r.b.log.Warn("cluster: records pulled for a snapshot raft did not take are cut before the entries that hold them are applied",
		"topic", p.topic, "partition", p.index, "applied_end", r.appliedEnd, "log_end", end)
	var err error
	if r.appliedEnd <= p.log.LogStartOffset() {
		err = p.log.Reset(r.appliedEnd) // the pull moved the start past what was applied
	} else {
		err = p.log.TruncateSuffix(r.appliedEnd)
	}
	if err != nil {
		return fmt.Errorf("partition %s/%d: cut records pulled past %d: %w", p.topic, p.index, r.appliedEnd, err)
	}
	return nil
}

// cutBack cuts the log back to end, where an entry that found no room began, and takes
// back what the entry changed in the producer and transaction state (the log first: a
// reader is never told a last stable offset above a record still there).
func (r *replicaLog) cutBack(end int64) error {
	p := r.p
	if p.log.HighWatermark() > end {
		if err := p.log.TruncateSuffix(end); err != nil {
			return err
		}
	}
	p.prod.Lock()
	p.prod.UndoLocked(&r.prodUndo)
	p.prod.Unlock()
	p.txn.undo(&r.txnUndo)
	return nil
}

// rebuildProducers builds the partition's idempotent-producer state and its transactions
// (open, aborted, the last marker sequence of each producer) again from its log, after
// the log was replaced or cut under it.
func (r *replicaLog) rebuildProducers() {
	p := r.p
	logger := r.b.log.With("topic", p.topic, "partition", p.index)
	p.prod.Reset()
	p.prod.Rebuild(p.log, r.b.opts.FS, p.dir, logger)
	p.txn.rebuild(p.log, r.b.opts.FS, p.dir, logger)
}

// appendReplicated is appendBatches in a cluster: the batches are proposed as one entry
// of the partition's group and answered once committed and applied here.
func (b *Broker) appendReplicated(ctx context.Context, p *partitionRT, raws [][]byte) (ProduceBatchesResult, error) {
	h := p.repl.Load()
	if h == nil {
		return ProduceBatchesResult{}, b.cluster.notLeader(p, 0)
	}
	// No bound of its own: a proposal resolves once applied, or as soon as this node loses
	// the leadership it was made under (multiraft, "Proposals"), outcome unknown; the
	// client then retries, deduplicated if idempotent.
	results, err := h.part.Append(ctx, raws)
	if err != nil {
		var nl *replpart.NotLeaderError
		switch {
		case errors.As(err, &nl):
			return ProduceBatchesResult{}, b.cluster.notLeader(p, int32(nl.Leader))
		case errors.Is(err, multiraft.ErrProposalDropped):
			// Not stored (a leadership transfer, too much uncommitted): the client
			// refreshes its metadata and sends again.
			return ProduceBatchesResult{}, b.cluster.notLeader(p, 0)
		case errors.Is(err, replpart.ErrOutcomeUnknown):
			return ProduceBatchesResult{}, fmt.Errorf("%w: %w", ErrReplicationUnknown, err)
		}
		return ProduceBatchesResult{}, err
	}
	res := ProduceBatchesResult{BaseOffsets: make([]int64, len(results)), Duplicate: make([]bool, len(results))}
	for i, r := range results {
		if r.Err != nil {
			return ProduceBatchesResult{}, mapStorageErr(r.Err)
		}
		res.BaseOffsets[i], res.Duplicate[i] = r.Base, r.Duplicate
	}
	res.LogStartOffset = p.log.LogStartOffset()
	return res, nil
}

// notLeader is the refusal of a request for partition p on a node that does not lead it,
// naming leader, or (0 on a node hosting no replica of p) the leader its peers named.
func (c *clusterRT) notLeader(p *partitionRT, leader int32) error {
	if leader == 0 && p.repl.Load() == nil {
		if rl, ok := c.unhostedLeader(p.topic, p.index); ok {
			leader = int32(rl.Leader)
		}
	}
	return &NotLeaderError{What: fmt.Sprintf("%s/%d", p.topic, p.index), Leader: leader}
}

// checkLeader refuses reads on a node that does not lead the partition: Kafka clients
// read from the leader, and a follower's high watermark lags its.
func (b *Broker) checkLeader(p *partitionRT) error {
	if b.cluster == nil {
		return nil
	}
	h := p.repl.Load()
	if h == nil {
		return b.cluster.notLeader(p, 0)
	}
	if leader, _ := h.part.Leader(); leader != b.cluster.node {
		return b.cluster.notLeader(p, int32(leader))
	}
	return nil
}
