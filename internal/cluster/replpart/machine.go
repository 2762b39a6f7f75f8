package replpart

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/replcursor"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// Log is the partition's local log, owned by the broker. The host calls Apply, Checkpoint,
// Restore and AppendRange from its Ready loop (or CreateGroup) only, one call at a time;
// ReadRange is called from the transport's goroutines, beside them.
type Log interface {
	// Apply appends the batches of one committed entry, stamping term as their leader epoch;
	// returns one result per batch. A deterministic refusal (a producer sequence out of order,
	// a fenced epoch) is a BatchResult.Err; a returned error (disk) stops the group here,
	// except one matching syscall.ENOSPC or EDQUOT, after which the log must be as before
	// the call: the entry is applied again once there is room (multiraft.NoRoomError).
	Apply(term uint64, batches [][]byte) ([]BatchResult, error)
	// Checkpoint makes everything applied durable and returns what Restore needs to come back
	// to exactly this point (the broker: its high watermark and log start).
	Checkpoint() ([]byte, error)
	// Restore returns the log to a checkpoint: cut what was applied after it. nil: empty log.
	// A log that ends before the checkpoint answers a *BehindError naming the offsets it
	// lacks; the Machine pulls them from a peer (AppendRange) and calls Restore again.
	Restore(checkpoint []byte) error
	// Lacks is the range [from, to) of a checkpoint's offsets the log does not hold (from >=
	// to: none), without changing the log: what a snapshot's preparation pulls.
	Lacks(checkpoint []byte) (from, to int64, err error)
	// ReadRange returns whole batches from offset from (from the log's start if from is
	// below it), ending before to, of about max bytes (at least one batch if there is one):
	// Start is where they begin, Next the offset after them. A log that holds nothing at
	// from answers Next <= from. It must be safe beside the other calls.
	ReadRange(from, to int64, max int) (Range, error)
	// AppendRange appends records a peer's ReadRange returned, at their own offsets and
	// with their own epochs, to a log that ends at at. r.Start above at first moves the
	// log's start up to r.Start (the source's retention deleted what lies between, as a
	// Kafka follower does when the leader's log starts past its end).
	AppendRange(at int64, r Range) error
}

// CheckpointAger is an optional interface of a Log whose checkpoint can lack what one
// taken now would hold (the broker's carries the producers' state only from a feature
// level on): the Machine then wants a snapshot after the next entry it applies, of any
// size, and an idle group is given one (multiraft.Host.ProposeEmpty) by the broker.
type CheckpointAger interface {
	// CheckpointOutdated reports that the last checkpoint taken or restored lacks what
	// Checkpoint would write now. Safe beside the other calls.
	CheckpointOutdated() bool
}

// BatchResult is what applying one batch did.
type BatchResult struct {
	Base      int64 // offset of the batch's first record (for a duplicate: where it was stored)
	Duplicate bool
	Err       error // deterministic refusal; carried to the proposer only (see below)
}

// snapVersion is the first byte of a snapshot: version(1) then the Log's checkpoint.
const snapVersion = 1

// DefaultSnapshotBytes is how many bytes of entries a partition applies between
// snapshots unless Machine.SnapshotBytes says otherwise.
const DefaultSnapshotBytes = 8 << 20

// Machine is a partition's replicated state on one node: the local Log, driven only by
// committed entries. It is a multiraft.StateMachine, CompactionLimiter, SnapshotWanter and
// RequestServer (it answers peers' pulls).
type Machine struct {
	node uint64
	log  Log
	src  *Source
	// SnapshotBytes: a snapshot is taken once this many bytes of entries were applied
	// since the last (DefaultSnapshotBytes), besides the host's SnapshotEntries.
	SnapshotBytes int64

	// Owned by the Ready loop.
	sinceSnap int64  // entry bytes applied since the last snapshot
	lastSnap  uint64 // index of the last snapshot taken here: its checkpoint is durable
	// captured is the checkpoint of the last snapshot taken here, until the host stores
	// it (CompactTo: CheckpointKeeper.CheckpointStored). Ready loop only.
	captured []byte
	pulls    pullCounters

	// results are the batches' outcomes of this node's produces, for Append; trimResults
	// its trims' (trim.go), for Trim.
	results     replcursor.Results[[]BatchResult]
	trimResults replcursor.Results[TrimResult]

	mu sync.Mutex
	// The subscriptions' cursors (cursors.go), guarded by mu: applied in the Ready loop,
	// read by the API (the time to stamp) and by stats.
	cursors       map[uint64]*subCursor
	clock         replcursor.Clock
	cursorResults replcursor.Results[CursorResult]

	// api is the Partition over this machine, through which a peer's request proposes
	// (cursor_skip.go); nil until NewPartition.
	api atomic.Pointer[Partition]
}

var (
	_ multiraft.StateMachine      = (*Machine)(nil)
	_ multiraft.CompactionLimiter = (*Machine)(nil)
	_ multiraft.SnapshotWanter    = (*Machine)(nil)
	_ multiraft.RequestServer     = (*Machine)(nil)
	_ multiraft.SnapshotPreparer  = (*Machine)(nil)
)

// NewMachine returns the state machine of a partition on node (whose proposals' results it
// keeps) over its local log.
func NewMachine(node multiraft.NodeID, log Log) *Machine {
	return &Machine{node: uint64(node), log: log, cursors: map[uint64]*subCursor{}}
}

// Apply hands each committed entry's batches to the log, with the entry's term as their
// leader epoch. A malformed entry, a log error or a log that answers for the wrong number
// of batches stops the group here.
func (m *Machine) Apply(ents []multiraft.Entry) error {
	for _, e := range ents {
		if len(e.Data) > 0 && e.Data[0] == cursorVersion {
			if err := m.applyCursor(e); err != nil {
				return err
			}
			continue
		}
		if len(e.Data) > 0 && e.Data[0] == trimVersion {
			if err := m.applyTrim(e); err != nil {
				return err
			}
			continue
		}
		if len(e.Data) > 0 && e.Data[0] == forgetVersion {
			if err := m.applyForget(e); err != nil {
				return err
			}
			continue
		}
		en, err := Decode(e.Data)
		if err != nil {
			return fmt.Errorf("replpart: entry %d: %w", e.Index, err)
		}
		rs, err := m.log.Apply(e.Term, en.Batches)
		if err != nil {
			err = fmt.Errorf("replpart: entry %d: log: %w", e.Index, err)
			if vfs.NoSpace(err) {
				return &multiraft.NoRoomError{Index: e.Index, Err: err} // the log is as before it
			}
			return err
		}
		if len(rs) != len(en.Batches) {
			return fmt.Errorf("replpart: entry %d: log answered %d results for %d batches", e.Index, len(rs), len(en.Batches))
		}
		if en.Origin == m.node {
			m.results.Keep(e.Index, en.Request, rs)
		}
		m.sinceSnap += int64(len(e.Data))
	}
	return nil
}

// Snapshot makes the log durable up to the last applied entry and returns its checkpoint:
// the host restores it (Restore) and re-applies the entries after it.
func (m *Machine) Snapshot() ([]byte, error) {
	cp, err := m.log.Checkpoint()
	if err != nil {
		return nil, fmt.Errorf("replpart: checkpoint: %w", err)
	}
	m.sinceSnap, m.captured = 0, cp
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.encodeSnapshot(cp), nil
}

// Restore returns the log to a snapshot's checkpoint (nil: empty). A local log that ends
// before the checkpoint (a new replica, a wiped log, a follower sent the snapshot because
// the Raft log was compacted past it) is first filled from a peer (pull): Restore returns
// once the local log holds every record the checkpoint names, or fails with ErrNoSource.
// Results kept for proposers are dropped: multiraft fails the proposals of a replica that
// restores a snapshot with ErrOutcomeUnknown, and after a restart nobody waits.
func (m *Machine) Restore(data []byte) error {
	m.results.Reset()
	m.cursorResults.Reset()
	m.trimResults.Reset()
	m.sinceSnap, m.captured = 0, nil
	snap, err := decodeSnapshot(data, true)
	if err != nil {
		return err
	}
	cp := snap.checkpoint
	err = m.log.Restore(cp)
	var be *BehindError
	if errors.As(err, &be) {
		if err := m.pullDurable(context.Background(), be.From, be.To); err != nil {
			return fmt.Errorf("replpart: restore checkpoint: %w", err)
		}
		err = m.log.Restore(cp)
	}
	if err != nil {
		return fmt.Errorf("replpart: restore checkpoint: %w", err)
	}
	// The cursors as of the snapshot's index; the entries after it re-apply onto them.
	m.mu.Lock()
	m.cursors = snap.cursors
	m.clock.Set(snap.now)
	m.mu.Unlock()
	return nil
}

// PrepareSnapshot pulls, before raft sees a leader's snapshot and off the host's Ready loop
// (multiraft.SnapshotPreparer), the records its checkpoint names that the local log lacks;
// Restore then finds them there. It never cuts the log: raft may yet refuse the snapshot.
func (m *Machine) PrepareSnapshot(ctx context.Context, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	snap, err := decodeSnapshot(data, false)
	if err != nil {
		return err
	}
	from, to, err := m.log.Lacks(snap.checkpoint)
	if err != nil || from >= to {
		return err
	}
	return m.pullDurable(ctx, from, to)
}

// pullDurable pulls [from, to) and syncs it: the pulled records were appended without
// fsync, and a crash must not send this replica to its peers for them again.
func (m *Machine) pullDurable(ctx context.Context, from, to int64) error {
	if err := m.pull(ctx, from, to); err != nil {
		return err
	}
	if _, err := m.log.Checkpoint(); err != nil {
		return fmt.Errorf("replpart: sync pulled records: %w", err)
	}
	return nil
}

// WantSnapshot asks for a snapshot every SnapshotBytes of entries applied, and after any
// entry while the last checkpoint is outdated (CheckpointAger).
func (m *Machine) WantSnapshot() bool {
	if m.sinceSnap >= m.snapshotLimit() {
		return true
	}
	a, ok := m.log.(CheckpointAger)
	return ok && a.CheckpointOutdated()
}

func (m *Machine) snapshotLimit() int64 {
	if m.SnapshotBytes <= 0 {
		return DefaultSnapshotBytes
	}
	return m.SnapshotBytes
}

// CompactTo compacts the Raft log to the snapshot before this one: the Raft log keeps the
// entries of the last two snapshot intervals, so a follower a little behind catches up
// from the log, and one further behind is sent the snapshot and pulls the records. The
// host calls it once it stored the snapshot at snap, the last one taken here: the log
// may now keep what its checkpoint names (CheckpointKeeper).
func (m *Machine) CompactTo(snap uint64) uint64 {
	if k, ok := m.log.(CheckpointKeeper); ok && m.captured != nil {
		k.CheckpointStored(m.captured)
	}
	m.captured = nil
	to := m.lastSnap
	m.lastSnap = snap
	return to
}

// CompactLimit is the index of the last snapshot taken here, whose checkpoint Snapshot
// made durable before the host stored it: the Raft log is never compacted past a
// checkpoint the local log does not hold on disk (0 until one is taken).
func (m *Machine) CompactLimit() uint64 { return m.lastSnap }
