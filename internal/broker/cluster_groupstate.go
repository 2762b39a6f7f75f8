package broker

// The consumer groups' whole state in a metadata snapshot (meta/groupstate.go, feature
// level 3; docs/cluster.md, "Consumer groups"): what lets the metadata log be compacted.
//
// Every snapshot of the metadata group carries the journal's state (the journaled
// coordinator: committed entries only) as group-offsets payloads that rebuild it from
// nothing. A node restoring such a snapshot, a follower that fell behind the compacted log
// or a restart, first forgets every group (ForgetGroups) and then applies them: a group
// deleted in entries it never received must not survive on it. The forgetting is
// journaled as one empty value (forgetGroupsMark), which a replay of the journal applies
// in its place, so a crash after it cannot bring the forgotten groups back.

import (
	"encoding/binary"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/group"
)

var _ meta.GroupStateSnapshotter = (*clusterGroups)(nil)

// forgetGroupsMark is the journal value that forgets every group (groups.go's loader):
// no encoded event is empty.
var forgetGroupsMark = []byte{}

// GroupState gives a metadata snapshot the journal's groups as payloads of at most
// meta.MaxGroupOffsets bytes and maxGroupEvents events each, in the order
// group.Coordinator.Snapshot lists their events (which rebuild the groups from nothing).
// Called from the metadata group's Ready loop after Checkpoint, so the journal's state is
// that of the last entry applied. ok is false when one event alone does not fit a payload.
func (c *clusterGroups) GroupState() (payloads [][]byte, ok bool, err error) {
	return c.CaptureGroupState()()
}

var _ meta.GroupStateCapturer = (*clusterGroups)(nil)

// CaptureGroupState is GroupState captured as of now, cheaply (group.Coordinator's
// CaptureSnapshot), for the metadata snapshot's encoding to build off the Ready loop.
func (c *clusterGroups) CaptureGroupState() func() ([][]byte, bool, error) {
	c.g.mu.Lock()
	build := c.journaled.CaptureSnapshot()
	c.g.mu.Unlock()
	return func() ([][]byte, bool, error) { return groupStatePayloads(build()) }
}

// groupStatePayloads packs a snapshot's events into payloads (GroupState).
func groupStatePayloads(evs []group.Event) (payloads [][]byte, ok bool, err error) {
	// A payload is a version byte, a count and each event with its length: room for the
	// first two, and for each length, is kept below the limit.
	const header = 1 + binary.MaxVarintLen64
	var raws [][]byte
	size := header
	for _, ev := range evs {
		raw, err := ev.MarshalBinary()
		if err != nil {
			return nil, false, err
		}
		n := len(raw) + binary.MaxVarintLen64
		if header+n > meta.MaxGroupOffsets {
			return nil, false, nil
		}
		if len(raws) == maxGroupEvents || size+n > meta.MaxGroupOffsets {
			payloads = append(payloads, appendGroupEvents(nil, raws))
			raws, size = nil, header
		}
		raws, size = append(raws, raw), size+n
	}
	if len(raws) > 0 {
		payloads = append(payloads, appendGroupEvents(nil, raws))
	}
	return payloads, true, nil
}

// ForgetGroups forgets every group on this node, in the coordinator, the journal's state
// and the journal itself (forgetGroupsMark), before a complete snapshot's groups are
// applied. It is called on a follower restoring a snapshot or on a node opening, never
// on a controller serving groups (a leader is never sent a snapshot).
func (c *clusterGroups) ForgetGroups() error {
	g := c.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return ErrClosed
	}
	g.coord.Forget()
	c.journaled.Forget()
	c.unsyncedLocked(g.recordLocked([][]byte{forgetGroupsMark}))
	return nil
}
