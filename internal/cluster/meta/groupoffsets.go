package meta

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
)

// Consumer-group offsets ride on the metadata group (docs/cluster.md, "Consumer groups"):
// the coordinator proposes one OpGroupOffsets command per change of committed offsets,
// and every node hands its payload, bytes this package never reads, to the broker's
// GroupOffsets hook, which applies it to its local group state and journal. The offsets
// are not part of State: the broker's group journal on each node is their durable copy,
// made durable up to the snapshot's index before every snapshot (Checkpoint), and the log
// after the snapshot is re-applied at restart, as a replicated partition does with its
// local log (docs/cluster.md, "Replicated partition"). What a snapshot carries of them
// depends on the feature level (membership_offsets.go, groupstate.go).

// GroupOffsets is the hook the broker registers (Machine.SetGroupOffsets).
type GroupOffsets interface {
	// ApplyGroupOffsets applies one committed payload. Called in log order from the host's
	// Ready loop (or from SetGroupOffsets for what was applied before the hook was set),
	// never twice at once. It must not wait for a sync: the journal write may be durable
	// later, by the next Checkpoint. An error stops the metadata group on this node (an
	// entry cannot be skipped).
	ApplyGroupOffsets(index uint64, payload []byte) error
	// Checkpoint makes everything applied so far durable. Called before every snapshot of
	// the metadata group: the snapshot says the entries up to its index need not be
	// re-applied. An error fails the snapshot, which stops the group on this node.
	Checkpoint() error
}

// groupOffsets is one applied OpGroupOffsets entry.
type groupOffsets struct {
	index   uint64
	payload []byte
}

// SetGroupOffsets registers the hook and hands it, in order, the payloads applied before
// it was set: the host starts applying the metadata log (a restart re-applies the tail
// after the snapshot) before the broker opens. Set once, before the broker serves.
func (m *Machine) SetGroupOffsets(h GroupOffsets) error {
	m.gmu.Lock()
	defer m.gmu.Unlock()
	m.hook, m.offsets = h, true
	if err := m.forgetLocked(); err != nil { // groupstate.go
		return err
	}
	for len(m.pending) > 0 {
		o := m.pending[0]
		if err := h.ApplyGroupOffsets(o.index, o.payload); err != nil {
			return fmt.Errorf("meta: entry %d: group offsets: %w", o.index, err)
		}
		m.pending = m.pending[1:]
	}
	m.pending = nil
	return nil
}

// deliver hands applied payloads to the hook, or keeps them until one is set. An empty
// payload (a barrier) carries nothing.
func (m *Machine) deliver(offs []groupOffsets) error {
	if len(offs) == 0 {
		return nil
	}
	m.gmu.Lock()
	defer m.gmu.Unlock()
	m.offsets = true
	for _, o := range offs {
		if len(o.payload) == 0 {
			continue
		}
		if m.hook == nil {
			// The entry's bytes are the host's: keep a copy.
			m.pending = append(m.pending, groupOffsets{o.index, bytes.Clone(o.payload)})
			continue
		}
		if err := m.hook.ApplyGroupOffsets(o.index, o.payload); err != nil {
			return fmt.Errorf("meta: entry %d: group offsets: %w", o.index, err)
		}
	}
	return nil
}

// checkpoint runs the hook's Checkpoint before a snapshot, and returns what the snapshot
// carries of the groups: their complete state when the level and the hook allow
// (complete, groupstate.go), else the payloads still waiting for a hook (nothing else
// holds them) or, with a hook, its committed offsets (membership_offsets.go).
func (m *Machine) checkpoint() (pending []groupOffsets, gs groupState, complete bool, err error) {
	m.gmu.Lock()
	defer m.gmu.Unlock()
	m.snapGen++
	if m.hook == nil {
		if m.forget {
			// A complete state and the entries applied after it, all waiting for the hook:
			// together, the complete state as of now.
			gs := groupState{index: m.lastApplied}
			for _, o := range m.pending {
				gs.payloads = append(gs.payloads, o.payload)
			}
			m.complete = true
			return nil, gs, true, nil
		}
		m.complete = false
		return m.pending, groupState{}, false, nil
	}
	if err := m.hook.Checkpoint(); err != nil {
		return nil, groupState{}, false, fmt.Errorf("meta: group offsets checkpoint: %w", err)
	}
	if gs, complete, err = m.snapshotGroupState(); err != nil || complete {
		m.complete = complete
		return nil, gs, complete, err
	}
	m.complete = false
	pending, err = m.offsetsSnapshot() // nothing is pending once a hook is set
	return pending, groupState{}, false, err
}

// restorePending replaces the payloads waiting for a hook by a snapshot's, and hands them
// to the hook if one is set.
func (m *Machine) restorePending(p []groupOffsets) error {
	m.gmu.Lock()
	m.snapGen++
	m.pending = p
	m.complete, m.forget = false, false
	m.offsets = m.offsets || len(p) > 0
	h := m.hook
	m.gmu.Unlock()
	if h == nil {
		return nil
	}
	return m.SetGroupOffsets(h)
}

// appendPending encodes the payloads a snapshot carries:
//
//	n(uvarint, >= 1) {index(uvarint) payload(bytes)}...   indexes increasing
func appendPending(b []byte, p []groupOffsets) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	for _, o := range p {
		b = binary.AppendUvarint(b, o.index)
		b = appendBytes(b, o.payload)
	}
	return b
}

func (d *decoder) pending() []groupOffsets {
	n := d.count()
	if d.Err == nil && n == 0 {
		d.Fail("an empty group-offsets section")
	}
	var out []groupOffsets
	for i := uint64(0); i < n && d.Err == nil; i++ {
		o := groupOffsets{index: d.Uvarint(), payload: bytes.Clone(d.Bytes(MaxGroupOffsets))}
		if d.Err == nil && (len(o.payload) == 0 || len(out) > 0 && out[len(out)-1].index >= o.index) {
			d.Fail("group offsets at %d: empty or out of order", o.index)
		}
		out = append(out, o)
	}
	return out
}

// ProposeGroupOffsets proposes one group-offsets payload and returns once it is committed
// and applied on this node (handed to the hook). Leader only: a follower answers
// *NotLeaderError. An empty payload is a barrier: once it returns, this node has applied
// every entry committed before it, so its group offsets are as new as the cluster's.
func (c *Catalog) ProposeGroupOffsets(ctx context.Context, payload []byte) error {
	if len(payload) > MaxGroupOffsets {
		return fmt.Errorf("meta: group offsets of %d bytes (max %d)", len(payload), MaxGroupOffsets)
	}
	_, err := c.do(ctx, Command{Op: OpGroupOffsets, Payload: payload})
	return err
}

// ProposeGroupOffsetsAsync is ProposeGroupOffsets without the wait: the entry takes its
// place in the log now (so a caller that proposes under its own lock orders its entries),
// and the function it returns waits for it to be applied here. level is the feature level
// the payload's contents need (features.go; the broker knows which of its records need
// what): above the catalog's, the payload is refused (ErrFeatureLevel), for an older
// member would stop on it.
func (c *Catalog) ProposeGroupOffsetsAsync(payload []byte, level int) (func(context.Context) error, error) {
	if len(payload) > MaxGroupOffsets {
		return nil, fmt.Errorf("meta: group offsets of %d bytes (max %d)", len(payload), MaxGroupOffsets)
	}
	if err := c.sm.State().Admits(level, "these group records"); err != nil {
		return nil, err
	}
	wait, err := c.doAsync(Command{Op: OpGroupOffsets, Payload: payload})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		_, err := wait(ctx)
		return err
	}, nil
}

// Term is the metadata group's term and whether this node leads it.
func (c *Catalog) Term() (term uint64, leader bool) {
	st, err := c.host.Status(Group)
	if err != nil {
		return 0, false
	}
	return st.Term, st.Leader == c.host.Node()
}
