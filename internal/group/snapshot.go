package group

import (
	"cmp"
	"maps"
	"slices"
)

// A snapshot of the coordinator's durable state, as the events that rebuild it. A
// metadata snapshot of a cluster carries it, taken between two applies so that it is the
// state as of one index; walking and sorting every committed offset there held the
// node's Ready loop (60 ms for 200,000 offsets). CaptureSnapshot is the cheap part, done
// there: it keeps each group's offsets map as it is and marks it shared, and the next
// change to a shared map clones it first (copy on write, in group.apply), so a captured
// map is never written again and the events can be built later, on another goroutine.

// Snapshot returns events that rebuild every group's committed offsets (and,
// with Config.DurableMembership, the membership of each classic or consumer group that
// has members), so the broker can replace a long journal with them. Offsets are grouped
// by group and commit time (an event carries one time).
func (c *Coordinator) Snapshot() []Event { return snapshotEvents(c.capture(false)) }

// CaptureSnapshot captures what Snapshot would return now, and returns the function that
// builds it. The capture costs a pointer per group and the membership of groups that have
// members; the function, which sorts and copies every offset, may run later, once, on any
// goroutine, while c goes on changing: nothing it reads is written after the capture.
func (c *Coordinator) CaptureSnapshot() func() []Event {
	captured := c.capture(true)
	return func() []Event { return snapshotEvents(captured) }
}

// capture lists what a snapshot holds of each group; shared marks the offsets maps it
// keeps as shared (a snapshot built at once copies them before c changes: no need).
func (c *Coordinator) capture(shared bool) []capturedGroup {
	captured := make([]capturedGroup, 0, len(c.groups))
	for id, g := range c.groups {
		cg := capturedGroup{id: id, protocolType: g.protocolType, mode: g.mode, offsets: g.offsets}
		g.offsetsShared = g.offsetsShared || shared
		switch {
		case !c.cfg.DurableMembership:
		case g.cg == nil && len(g.members) > 0:
			cg.members = g.membersEvent()
		case g.cg != nil && len(g.cg.members) > 0:
			cg.members = fullConsumerEvent(id, g.cg)
		}
		captured = append(captured, cg)
	}
	return captured
}

// capturedGroup is what a snapshot holds of one group. offsets is shared with the group
// until the group's next change (group.offsetsShared).
type capturedGroup struct {
	id           string
	protocolType string
	mode         AssignMode
	offsets      map[topicPartition]Committed
	members      Event // Type 0: none
}

// snapshotEvents builds a snapshot's events, groups in order of id, each group's offsets
// in order of commit time, then topic and partition: one event per commit time, sharing
// one array (each event's slice capped, so appending to one cannot overwrite the next).
func snapshotEvents(groups []capturedGroup) []Event {
	slices.SortFunc(groups, func(a, b capturedGroup) int { return cmp.Compare(a.id, b.id) })
	var evs []Event
	for _, g := range groups {
		if g.protocolType != "" {
			evs = append(evs, Event{Type: EventGroupProtocol, Group: g.id, ProtocolType: g.protocolType, Mode: g.mode})
		}
		offsets := make([]CommittedOffset, 0, len(g.offsets))
		for tp, o := range g.offsets {
			offsets = append(offsets, CommittedOffset{Topic: tp.topic, Partition: tp.partition, Committed: o})
		}
		slices.SortFunc(offsets, func(a, b CommittedOffset) int {
			return cmp.Or(a.CommitTime.Compare(b.CommitTime), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
		})
		for i := 0; i < len(offsets); {
			j := i + 1
			for j < len(offsets) && offsets[j].CommitTime.Equal(offsets[i].CommitTime) {
				j++
			}
			evs = append(evs, Event{Type: EventOffsetsCommitted, Group: g.id, Time: offsets[i].CommitTime, Offsets: offsets[i:j:j]})
			i = j
		}
		if g.members.Type != 0 {
			evs = append(evs, g.members)
		}
	}
	return evs
}

// ownOffsets makes g's offsets map its own before a change, if a snapshot captured it.
func (g *group) ownOffsets() {
	if g.offsetsShared {
		g.offsets = maps.Clone(g.offsets)
		g.offsetsShared = false
	}
}
