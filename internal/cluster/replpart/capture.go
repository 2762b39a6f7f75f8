package replpart

import (
	"fmt"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// A partition's snapshot made durable off the Ready loop (multiraft.SnapshotCapturer).
// Snapshot's Checkpoint fdatasyncs the local log, which apply writes without syncing, in
// the node's Ready loop, where every group of the node waits: 0.5-2 ms under W1 with the
// broker's sync-ahead (15-38 ms without), plus the disk's fdatasync tail, several times a
// second per partition under load. With a Log that can capture its checkpoint (CheckpointCapturer)
// the loop only captures it and the cursors; the goroutine the host runs the encoding on
// syncs. The host stores the snapshot only after, so the Raft log is still never
// compacted past a checkpoint the local log does not hold on disk (CompactLimit).

// CheckpointCapturer is an optional interface of a Log.
type CheckpointCapturer interface {
	// CaptureCheckpoint returns the checkpoint Checkpoint would return now, without
	// waiting for the disk, and persist, which makes it durable: called once, later, on
	// another goroutine, while Apply goes on (it may make more durable than the
	// checkpoint names, never less).
	CaptureCheckpoint() (checkpoint []byte, persist func() error, err error)
}

// CheckpointKeeper is an optional interface of a Log whose checkpoint names state the log
// must make durable only once a snapshot holding the checkpoint is stored: the broker's log
// start, raised by DeleteRecords. Kept before that, a crash would restart from the snapshot
// before on a log already trimmed, and the entries applied again before the trim would not
// find the records they found the first time; so the Log keeps it in memory until then,
// and Restore raises it again from the checkpoint.
type CheckpointKeeper interface {
	// CheckpointStored says the snapshot holding checkpoint (the last one Checkpoint or
	// CaptureCheckpoint returned) is stored. Called from the Ready loop.
	CheckpointStored(checkpoint []byte)
}

var _ multiraft.SnapshotCapturer = (*Machine)(nil)

// CaptureSnapshot is Snapshot, its checkpoint made durable and its cursors encoded by the
// encoding's goroutine (captureCursors). A Log that cannot capture is checkpointed at
// once, as Snapshot does.
func (m *Machine) CaptureSnapshot() (func() ([]byte, error), error) {
	c, ok := m.log.(CheckpointCapturer)
	if !ok {
		data, err := m.Snapshot()
		if err != nil {
			return nil, err
		}
		return func() ([]byte, error) { return data, nil }, nil
	}
	cp, persist, err := c.CaptureCheckpoint()
	if err != nil {
		return nil, fmt.Errorf("replpart: checkpoint: %w", err)
	}
	m.sinceSnap, m.captured = 0, cp
	m.mu.Lock()
	snap := m.captureCursors(cp)
	m.mu.Unlock()
	return func() ([]byte, error) {
		if err := persist(); err != nil {
			return nil, fmt.Errorf("replpart: checkpoint: %w", err)
		}
		return snap.encode(), nil
	}, nil
}
