package replpart

import (
	"fmt"
	"sync"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// Log is the partition's local log, owned by the broker. The host calls it from its Ready
// loop only, one call at a time.
type Log interface {
	// Apply appends the batches of one committed entry, stamping term as their leader epoch;
	// returns one result per batch. A deterministic refusal (a producer sequence out of order,
	// a fenced epoch) is a BatchResult.Err; a returned error (disk) stops the group here.
	Apply(term uint64, batches [][]byte) ([]BatchResult, error)
	// Checkpoint makes everything applied durable and returns what Restore needs to come back
	// to exactly this point (the broker: its high watermark).
	Checkpoint() ([]byte, error)
	// Restore returns the log to a checkpoint: cut what was applied after it. nil: empty log.
	Restore(checkpoint []byte) error
}

// BatchResult is what applying one batch did.
type BatchResult struct {
	Base      int64 // offset of the batch's first record (for a duplicate: where it was stored)
	Duplicate bool
	Err       error // deterministic refusal; carried to the proposer only (see below)
}

// snapVersion is the first byte of a snapshot: version(1) then the Log's checkpoint.
const snapVersion = 1

// maxResults bounds the results kept for this node's proposals whose caller gave up
// waiting (or that a restart re-applied with nobody waiting).
const maxResults = 4096

// result is one entry's outcome, kept for this node's proposer.
type result struct {
	request uint64
	batches []BatchResult
}

// Machine is a partition's replicated state on one node: the local Log, driven only by
// committed entries. It is a multiraft.StateMachine and a multiraft.CompactionLimiter.
type Machine struct {
	node uint64
	log  Log

	mu      sync.Mutex // the host applies; Append callers take results
	results map[uint64]result
}

var (
	_ multiraft.StateMachine      = (*Machine)(nil)
	_ multiraft.CompactionLimiter = (*Machine)(nil)
)

// NewMachine returns the state machine of a partition on node (whose proposals' results it
// keeps) over its local log.
func NewMachine(node multiraft.NodeID, log Log) *Machine {
	return &Machine{node: uint64(node), log: log, results: map[uint64]result{}}
}

// Apply hands each committed entry's batches to the log, with the entry's term as their
// leader epoch. A malformed entry, a log error or a log that answers for the wrong number
// of batches stops the group here.
func (m *Machine) Apply(ents []multiraft.Entry) error {
	for _, e := range ents {
		en, err := Decode(e.Data)
		if err != nil {
			return fmt.Errorf("replpart: entry %d: %w", e.Index, err)
		}
		rs, err := m.log.Apply(e.Term, en.Batches)
		if err != nil {
			return fmt.Errorf("replpart: entry %d: log: %w", e.Index, err)
		}
		if len(rs) != len(en.Batches) {
			return fmt.Errorf("replpart: entry %d: log answered %d results for %d batches", e.Index, len(rs), len(en.Batches))
		}
		if en.Origin == m.node {
			m.keep(e.Index, result{request: en.Request, batches: rs})
		}
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
	return append([]byte{snapVersion}, cp...), nil
}

// Restore cuts the log back to a snapshot's checkpoint (nil: empty). Results kept for
// proposers are dropped: multiraft fails the proposals of a replica that restores a
// snapshot with ErrOutcomeUnknown, and after a restart nobody waits.
func (m *Machine) Restore(data []byte) error {
	m.mu.Lock()
	m.results = map[uint64]result{}
	m.mu.Unlock()
	var cp []byte
	if len(data) > 0 {
		if data[0] != snapVersion {
			return fmt.Errorf("replpart: snapshot version %d", data[0])
		}
		cp = data[1:]
	}
	if err := m.log.Restore(cp); err != nil {
		return fmt.Errorf("replpart: restore checkpoint: %w", err)
	}
	return nil
}

// CompactLimit is 0: the host never compacts a partition's Raft log. A snapshot is only a
// checkpoint, so a follower behind the compacted log would get a high watermark and no
// records. Tying the limit to the local log's retention is later work (docs/cluster.md).
func (m *Machine) CompactLimit() uint64 { return 0 }

// keep records a result for this node's proposer, dropping old ones once there are too
// many (their callers stopped waiting).
func (m *Machine) keep(index uint64, r result) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.results[index] = r
	if len(m.results) <= maxResults {
		return
	}
	for i := range m.results {
		if i+maxResults/2 < index {
			delete(m.results, i)
		}
	}
}

// take removes and returns the results of this node's entry at index with request req.
func (m *Machine) take(index, req uint64) ([]BatchResult, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.results[index]
	if !ok || r.request != req {
		return nil, false
	}
	delete(m.results, index)
	return r.batches, true
}
