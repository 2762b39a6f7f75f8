package meta

import "fmt"

// A node added to the cluster is seeded by a snapshot of the metadata group, not by its
// log (its log starts at the bootstrap snapshot, which does not name the node), and the
// catalog's snapshot alone does not hold the consumer groups' committed offsets: the
// node would lack every offset committed before it joined, and serve them as missing
// once it became the controller. So a hook that can (GroupOffsetsSnapshotter) puts the
// committed offsets in every snapshot, as one payload the snapshot carries the way it
// carries payloads applied before a hook was set; a node restoring the snapshot applies
// it like any other payload (a restart re-applies it, then the log after it: the same
// overwrite with the same values a replayed log already makes).

// GroupOffsetsSnapshotter is an optional interface of a GroupOffsets hook.
type GroupOffsetsSnapshotter interface {
	// SnapshotGroupOffsets returns one payload that sets every committed offset as of the
	// last payload applied (nil: none). Called from the host's Ready loop before a
	// snapshot, after Checkpoint.
	SnapshotGroupOffsets() ([]byte, error)
}

// offsetsSnapshot returns the hook's committed offsets as a payload to carry in a
// snapshot (none if the hook cannot, or they are past MaxGroupOffsets: then a node added
// later lacks them, as before). m.gmu is held.
func (m *Machine) offsetsSnapshot() ([]groupOffsets, error) {
	s, ok := m.hook.(GroupOffsetsSnapshotter)
	if !ok || m.lastApplied == 0 {
		return nil, nil
	}
	p, err := s.SnapshotGroupOffsets()
	if err != nil {
		return nil, fmt.Errorf("meta: group offsets snapshot: %w", err)
	}
	if len(p) == 0 || len(p) > MaxGroupOffsets {
		return nil, nil
	}
	return []groupOffsets{{index: m.lastApplied, payload: p}}, nil
}
