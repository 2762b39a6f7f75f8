package meta

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// OpReassign gives Group the replicas Replicas in one move: any of them, any number of them
// (the replication factor changes with it). It is Kafka's AlterPartitionReassignments; the
// group's leader drives it as any move (the broker's mover, multiraft.PlanMove: learners
// first, caught up, then one joint-consensus change), and records OpMoveDone at the end.
// A group moving already (a reassignment, a node's removal, a rebalance) gets the new
// target instead, as Kafka replaces a reassignment under way: PlanMove takes a group from
// whatever configuration it is in, and Old keeps every node the configuration may still
// hold (setReplicas), so each keeps hosting it until the new target is reached.
const OpReassign Op = 16

// Reassign moves group g to the replicas reps (the first the preferred leader), replacing
// the target of a move under way. Refused (ErrInvalidNode) unless every replica is a
// distinct member; the group's replicas as they are change nothing but the pin.
func (c *Catalog) Reassign(ctx context.Context, g multiraft.GroupID, reps []multiraft.NodeID) error {
	cmd := Command{Op: OpReassign, Group: g, Replicas: reps}
	return c.membership(ctx, cmd, func(s *State) Result { return s.clone().reassign(g, reps) },
		func(s *State) bool {
			for _, gp := range s.Groups() {
				if gp.Group == g {
					return slices.Equal(gp.Replicas, reps)
				}
			}
			return true
		})
}

func (s *State) reassign(id multiraft.GroupID, reps []multiraft.NodeID) Result {
	var g *GroupPlacement
	for _, x := range s.Groups() {
		if x.Group == id {
			g = &x
			break
		}
	}
	if g == nil {
		return Result{Err: fmt.Errorf("%w: no group %d", ErrMove, id)}
	}
	if len(reps) == 0 || len(reps) > MaxReplicas {
		return Result{Err: fmt.Errorf("%w: %d replicas for %s (1..%d)", ErrInvalidNode, len(reps), g.What(), MaxReplicas)}
	}
	members := s.members()
	for i, r := range reps {
		if !slices.Contains(members, r) {
			return Result{Err: fmt.Errorf("%w: node %d is not a member: it cannot hold a replica of %s", ErrInvalidNode, r, g.What())}
		}
		if slices.Contains(reps[:i], r) {
			return Result{Err: fmt.Errorf("%w: node %d twice in the replicas of %s", ErrInvalidNode, r, g.What())}
		}
	}
	if slices.Equal(g.Replicas, reps) {
		s.pin(id) // where they are is where the operator wants them
		return Result{}
	}
	original := g.Original // a reassignment replaced keeps the first one's start
	if g.Old == nil {
		original = slices.Clone(g.Replicas)
	}
	s.setReplicas(id, slices.Clone(reps), true, original)
	return Result{}
}

// OpCancelReassign stops the reassignment moving Group: its replicas go back to those it
// had before the reassignment (Partition.Original), as a move like any other, and the
// group stays pinned. Kafka's AlterPartitionReassignments with null replicas.
const OpCancelReassign Op = 17

// ErrNoReassignment: the group is not being reassigned (not moving, or moving for a node's
// removal or a rebalance, which only those finish): nothing to cancel.
var ErrNoReassignment = errors.New("meta: no reassignment in progress")

// CancelReassign cancels group g's reassignment (OpCancelReassign); ErrNoReassignment if
// none is in progress.
func (c *Catalog) CancelReassign(ctx context.Context, g multiraft.GroupID) error {
	cmd := Command{Op: OpCancelReassign, Group: g}
	// Forwarded, it is done once the group's replicas are its original ones here: a
	// reassignment that finished first leaves them the target, and the leader's refusal
	// then comes back from the forward (Original alone would be gone either way).
	var original []multiraft.NodeID
	for _, gp := range c.sm.State().Groups() {
		if gp.Group == g {
			original = gp.Original
		}
	}
	return c.membership(ctx, cmd, func(s *State) Result { return s.clone().cancelReassign(g) },
		func(s *State) bool {
			for _, gp := range s.Groups() {
				if gp.Group == g {
					return slices.Equal(gp.Replicas, original)
				}
			}
			return true
		})
}

func (s *State) cancelReassign(id multiraft.GroupID) Result {
	for _, g := range s.Groups() {
		if g.Group != id {
			continue
		}
		if g.Old == nil || g.Original == nil {
			return Result{Err: fmt.Errorf("%w: %s", ErrNoReassignment, g.What())}
		}
		s.setReplicas(id, slices.Clone(g.Original), g.Pinned, nil)
		return Result{}
	}
	return Result{Err: fmt.Errorf("%w: no group %d", ErrNoReassignment, id)}
}

// pin pins group id where it is.
func (s *State) pin(id multiraft.GroupID) {
	for name, t := range s.Topics {
		for i, p := range t.Partitions {
			if p.Group == id && !p.Pinned {
				nt := *t
				nt.Partitions = slices.Clone(t.Partitions)
				nt.Partitions[i].Pinned = true
				s.Topics[name] = &nt
			}
		}
	}
	for name, q := range s.Queues {
		if q.Group == id && !q.Pinned {
			nq := *q
			nq.Pinned = true
			s.Queues[name] = &nq
		}
	}
}

// reassigning lists the groups a reassignment moves (those with an Original) by id, for
// the snapshot.
func (s *State) reassigning() []GroupPlacement {
	var out []GroupPlacement
	for _, g := range s.placements(true) {
		if g.Original != nil {
			out = append(out, g)
		}
	}
	return out
}

// pinnedGroups lists the pinned groups by id, for the snapshot.
func (s *State) pinnedGroups() []multiraft.GroupID {
	var out []multiraft.GroupID
	for _, g := range s.Groups() {
		if g.Pinned {
			out = append(out, g.Group)
		}
	}
	return out
}

func appendGroups(b []byte, ids []multiraft.GroupID) []byte {
	b = binary.AppendUvarint(b, uint64(len(ids)))
	for _, id := range ids {
		b = binary.AppendUvarint(b, uint64(id))
	}
	return b
}

// pins reads the snapshot's pinned groups and reassignments' originals into s, whose
// topics and queues it may still change (they are not handed out yet).
func (d *decoder) pins(s *State) {
	n := d.count()
	for i := uint64(0); i < n && d.Err == nil; i++ {
		id := multiraft.GroupID(d.Uvarint())
		if d.Err == nil && !s.markPinned(id) {
			d.Fail("pinned group %d unknown or pinned twice", id)
		}
	}
	n = d.count()
	for i := uint64(0); i < n && d.Err == nil; i++ {
		id := multiraft.GroupID(d.Uvarint())
		reps := d.nodes()
		if d.Err == nil && (len(reps) == 0 || !s.markOriginal(id, reps)) {
			d.Fail("reassigned group %d unknown, not moving or given twice", id)
		}
	}
}

// markOriginal sets a decoded moving group's Original in place; false if it is unknown,
// not moving or has one already.
func (s *State) markOriginal(id multiraft.GroupID, reps []multiraft.NodeID) bool {
	for _, t := range s.Topics {
		for i := range t.Partitions {
			if p := &t.Partitions[i]; p.Group == id {
				if p.Old == nil || p.Original != nil {
					return false
				}
				p.Original = reps
				return true
			}
		}
	}
	for _, q := range s.Queues {
		if q.Group == id {
			if q.Old == nil || q.Original != nil {
				return false
			}
			q.Original = reps
			return true
		}
	}
	return false
}

// markPinned pins a decoded group in place; false if it is unknown or pinned already.
func (s *State) markPinned(id multiraft.GroupID) bool {
	for _, t := range s.Topics {
		for i := range t.Partitions {
			if t.Partitions[i].Group == id {
				was := t.Partitions[i].Pinned
				t.Partitions[i].Pinned = true
				return !was
			}
		}
	}
	for _, q := range s.Queues {
		if q.Group == id {
			was := q.Pinned
			q.Pinned = true
			return !was
		}
	}
	return false
}
