package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/replpart"
)

// DeleteRecords in a cluster (docs/cluster.md, "DeleteRecords"): one trim entry of the
// partition's Raft group, so every replica moves its log start at the same point of the
// log and the subscriptions' cursors drop what lies below it alike (replpart's trim.go).
// The leader answers once the entry is committed and applied there. A replica keeps the
// moved start in memory (storage.Log.RaiseStart) until a snapshot whose checkpoint names
// it is stored (replicaLog.CheckpointStored): after a crash it restarts from the last
// stored snapshot and applies the entries after it again, the trim among them, and the
// ones before the trim must read the records they read the first time. A restart from a
// snapshot that names the start raises it again (replicaLog.Restore).

// deleteRecordsReplicated is DeleteRecords on a replicated partition, on its leader.
func (b *Broker) deleteRecordsReplicated(ctx context.Context, p *partitionRT, offset int64) (int64, error) {
	h := p.repl.Load()
	if h == nil {
		return 0, b.cluster.notLeader(p, 0)
	}
	if offset < replpart.TrimToEnd {
		return 0, fmt.Errorf("%w: DeleteRecords to %d", ErrOffsetOutOfRange, offset)
	}
	start, err := h.part.Trim(ctx, offset)
	var nl *replpart.NotLeaderError
	switch {
	case err == nil:
		return start, nil
	case errors.As(err, &nl):
		return 0, b.cluster.notLeader(p, int32(nl.Leader))
	case errors.Is(err, multiraft.ErrProposalDropped):
		return 0, b.cluster.notLeader(p, 0) // not stored: the client retries
	case errors.Is(err, replpart.ErrOutcomeUnknown):
		return 0, fmt.Errorf("%w: %w", ErrReplicationUnknown, err)
	}
	return 0, mapStorageErr(err)
}

// Trim is a trim entry applied on this replica (replpart.Trimmer): the log start moves up
// to offset in memory (Checkpoint makes it durable) and the idempotent producers whose
// batches all lie below it are forgotten, and the aborted transactions wholly below it,
// as a single node's DeleteRecords does. Every
// replica resolves TrimToEnd to the same offset and refuses the same offsets past the end:
// their logs end alike at every entry.
func (r *replicaLog) Trim(offset int64) (replpart.TrimResult, error) {
	p := r.p
	if err := r.dropUnapplied(); err != nil {
		return replpart.TrimResult{}, err
	}
	hw := p.log.HighWatermark()
	if offset == replpart.TrimToEnd {
		offset = hw
	}
	if offset > hw {
		return replpart.TrimResult{Cut: offset, Start: p.log.LogStartOffset(),
			Err: fmt.Errorf("%w: DeleteRecords to %d, high watermark %d", ErrOffsetOutOfRange, offset, hw)}, nil
	}
	start, err := p.log.RaiseStart(offset)
	if err != nil {
		return replpart.TrimResult{}, fmt.Errorf("partition %s/%d: %w", p.topic, p.index, err)
	}
	p.prod.Expire(offset)
	p.txn.expire(offset) // in log order on every replica, as the producers are
	return replpart.TrimResult{Cut: offset, Start: start}, nil
}
