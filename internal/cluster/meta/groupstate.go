package meta

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
)

// The whole consumer-group state in a snapshot, and a metadata log compacted behind it
// (feature level LevelGroupState; docs/cluster.md, "Consumer groups").
//
// Group-offsets payloads are bytes this package never reads, handed to the broker's hook:
// a snapshot of the catalog alone does not hold what they did, so a follower sent a
// snapshot instead of the entries behind it would lack it. Before this level the log was
// therefore never compacted once offsets flowed (CompactLimit), and grew with every commit.
//
// At LevelGroupState a hook that can (GroupStateSnapshotter) gives every snapshot the
// group state as of its index, as payloads that rebuild it from nothing; the snapshot is
// then complete (version 15) and the log may be compacted behind it. A node restoring a
// complete snapshot puts its state in place of its own: the hook forgets every group
// first (ForgetGroups), for a node that was behind may hold groups or offsets deleted in
// the entries it never received, which applying the state on top would keep. Why the
// level: a binary from before it cannot read version 15.

// GroupStateSnapshotter is an optional interface of a GroupOffsets hook, used at
// LevelGroupState.
type GroupStateSnapshotter interface {
	// GroupState returns payloads that, applied in order to a hook that forgot every
	// group, rebuild the committed group state as of the last payload applied (each at
	// most MaxGroupOffsets bytes; none when there is no group); ok is false when the
	// state is too large for a snapshot. Called from the host's Ready loop before a
	// snapshot, after Checkpoint.
	GroupState() (payloads [][]byte, ok bool, err error)
	// ForgetGroups forgets every group, committed offsets and records included, durably
	// in the order of what the hook applies: a complete snapshot's state is applied next.
	ForgetGroups() error
}

// MaxGroupStateBytes bounds the group state of one snapshot (the transport carries a
// snapshot as one message of at most 64 MiB). A larger state makes the snapshot
// incomplete, and the log is then no longer compacted (docs/cluster.md says so).
const MaxGroupStateBytes = 48 << 20

// groupStateLimit is MaxGroupStateBytes, lowered by a test.
var groupStateLimit = MaxGroupStateBytes

// snapVersionGroupState is 13 with the complete group state after the level:
//
//	index(uvarint) n(uvarint) {payload(bytes)}...
//
// index is the last entry the state includes; no payload: no group.
const snapVersionGroupState = 15

// groupState is a complete snapshot's group state.
type groupState struct {
	index    uint64
	payloads [][]byte
}

// snapshotGroupState returns the hook's complete group state for a snapshot, or ok false
// (an older level, a hook that cannot, a state too large). m.gmu is held.
func (m *Machine) snapshotGroupState() (gs groupState, ok bool, err error) {
	s, can := m.hook.(GroupStateSnapshotter)
	if !can || m.State().FeatureLevel() < LevelGroupState {
		return groupState{}, false, nil
	}
	payloads, ok, err := s.GroupState()
	fits, err := groupStateFits(payloads, ok, err)
	if err != nil {
		return groupState{}, false, err
	}
	m.stateTooLarge = !fits
	if !fits {
		return groupState{}, false, nil
	}
	return groupState{index: m.lastApplied, payloads: payloads}, true, nil
}

// groupStateFits checks what a hook's GroupState returned: whether it fits a snapshot
// (MaxGroupStateBytes), or the error to fail the snapshot with.
func groupStateFits(payloads [][]byte, ok bool, err error) (bool, error) {
	if err != nil {
		return false, fmt.Errorf("meta: group state snapshot: %w", err)
	}
	size := 0
	for _, p := range payloads {
		if len(p) == 0 || len(p) > MaxGroupOffsets {
			return false, fmt.Errorf("meta: group state snapshot: a payload of %d bytes", len(p))
		}
		size += len(p)
	}
	return ok && size <= groupStateLimit, nil
}

// GroupStateTooLarge reports whether this node's last metadata snapshot, at
// LevelGroupState, could not carry the consumer groups' state (past MaxGroupStateBytes):
// the metadata log is then no longer compacted, and a follower sent a snapshot lacks the
// groups (docs/cluster.md, "Compaction"). For the operator: a metric and a log line.
func (m *Machine) GroupStateTooLarge() bool {
	m.gmu.Lock()
	defer m.gmu.Unlock()
	return m.stateTooLarge
}

// restoreGroupState puts a complete snapshot's state in place of the hook's: forget every
// group, then apply the payloads. Without a hook yet they wait for SetGroupOffsets, which
// forgets first too (forget).
func (m *Machine) restoreGroupState(gs groupState) error {
	m.gmu.Lock()
	m.snapGen++
	m.pending, m.forget, m.complete, m.offsets = nil, true, true, true
	for _, p := range gs.payloads {
		m.pending = append(m.pending, groupOffsets{gs.index, p})
	}
	h := m.hook
	m.gmu.Unlock()
	if h == nil {
		return nil
	}
	return m.SetGroupOffsets(h)
}

// forgetLocked has the hook forget every group if a complete state waits for it. m.gmu is
// held.
func (m *Machine) forgetLocked() error {
	if !m.forget {
		return nil
	}
	f, ok := m.hook.(GroupStateSnapshotter)
	if !ok {
		return fmt.Errorf("meta: a snapshot holds the whole group state, and the group-offsets hook cannot forget its own")
	}
	if err := f.ForgetGroups(); err != nil {
		return fmt.Errorf("meta: forgetting the groups before a snapshot's: %w", err)
	}
	m.forget = false
	return nil
}

// CompactLimit lets the host compact the metadata log behind a snapshot that holds
// everything the entries before it gave the hook: one with the complete group state, or
// any while no group-offsets entry was ever applied and no hook set. Otherwise it keeps
// the whole log, for a follower sent the snapshot instead of entries would lack what they
// carried. (multiraft.CompactionLimiter, called after Snapshot; MaxUint64: no limit.)
func (m *Machine) CompactLimit() uint64 {
	m.gmu.Lock()
	defer m.gmu.Unlock()
	if m.offsets && !m.complete {
		return 0
	}
	return math.MaxUint64
}

func appendGroupState(b []byte, gs groupState) []byte {
	b = binary.AppendUvarint(b, gs.index)
	b = binary.AppendUvarint(b, uint64(len(gs.payloads)))
	for _, p := range gs.payloads {
		b = appendBytes(b, p)
	}
	return b
}

func (d *decoder) groupState(s *State) groupState {
	gs := groupState{index: d.Uvarint()}
	if d.Err == nil && gs.index < s.Index {
		d.Fail("group state as of %d, before the catalog's %d", gs.index, s.Index)
	}
	if d.Err == nil && s.Level < LevelGroupState {
		d.Fail("group state in a snapshot at feature level %d", s.Level)
	}
	n := d.count()
	for i := uint64(0); i < n && d.Err == nil; i++ {
		p := bytes.Clone(d.Bytes(MaxGroupOffsets))
		if d.Err == nil && len(p) == 0 {
			d.Fail("an empty group state payload")
		}
		gs.payloads = append(gs.payloads, p)
	}
	return gs
}
