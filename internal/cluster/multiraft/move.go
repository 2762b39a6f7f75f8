package multiraft

import (
	"fmt"
	"slices"
	"strings"
)

// Moving a group's replicas to a target set, one idempotent step at a time.
//
// A move is driven by the group's leader, and every step is decided afresh from the
// group's applied configuration (Membership), never from memory of an earlier step, so a
// leader that crashed at any point is replaced by one that takes the next step from
// wherever the configuration is: a learner added twice is one learner, a promotion already
// applied is not proposed again, and raft refuses a second configuration change while one
// is in flight. The steps, in order:
//
//  1. wait while the group is in joint consensus (raft leaves it by itself);
//  2. add each target member the configuration lacks as a learner (one per step): it is
//     sent a snapshot and the log without counting for commit;
//  3. wait until every target learner is caught up (CatchUpSlack);
//  4. if this leader is not a target member, hand leadership to a caught-up target voter
//     first (the leader then steps down by a transfer, not by its own removal);
//  5. promote the target learners and remove the voters not in the target in one
//     ConfChangeV2: joint consensus, which needs a majority of both the old and the new
//     voters, so no single step ever leaves a minority able to commit;
//  6. remove learners not in the target;
//  7. done when the voters are exactly the target and no learner or joint state is left.

// CatchUpSlack is how far (in entries) a learner's log may trail the leader's commit
// index and still count as caught up.
const CatchUpSlack = 64

// MoveStepKind is what PlanMove says to do next.
type MoveStepKind int

const (
	MoveDone     MoveStepKind = iota // the configuration is the target
	MoveWait                         // joint consensus, a learner catching up, not the leader
	MoveChange                       // propose Changes
	MoveTransfer                     // hand leadership to To first
)

// MoveStep is one step toward a target replica set.
type MoveStep struct {
	Kind    MoveStepKind
	Changes []Change
	To      NodeID // MoveTransfer
	Why     string // MoveWait: what it waits for
}

func (s MoveStep) String() string {
	switch s.Kind {
	case MoveDone:
		return "done"
	case MoveWait:
		return "wait: " + s.Why
	case MoveTransfer:
		return fmt.Sprintf("transfer n%d", s.To)
	}
	var parts []string
	for _, c := range s.Changes {
		parts = append(parts, fmt.Sprintf("%s n%d", [...]string{"voter", "learner", "remove"}[c.Kind], c.Node))
	}
	return strings.Join(parts, ", ")
}

// PlanMove returns the next step that takes group membership m, as its leader self sees
// it, to the voters target (order does not matter).
func PlanMove(m Membership, target []NodeID, self NodeID) MoveStep {
	switch {
	case !m.IsLeader:
		return MoveStep{Kind: MoveWait, Why: "not the leader"}
	case m.Joint():
		return MoveStep{Kind: MoveWait, Why: "joint consensus"}
	}
	for _, t := range target {
		if !slices.Contains(m.Voters, t) && !slices.Contains(m.Learners, t) {
			return MoveStep{Kind: MoveChange, Changes: []Change{{Kind: AddLearner, Node: t}}}
		}
	}
	var promote []Change
	for _, l := range m.Learners {
		if !slices.Contains(target, l) {
			continue
		}
		if !m.CaughtUp(l, CatchUpSlack) {
			return MoveStep{Kind: MoveWait, Why: fmt.Sprintf("learner n%d catching up", l)}
		}
		promote = append(promote, Change{Kind: AddVoter, Node: l})
	}
	var demote []Change
	for _, v := range m.Voters {
		if !slices.Contains(target, v) && v != self {
			demote = append(demote, Change{Kind: RemoveNode, Node: v})
		}
	}
	if !slices.Contains(target, self) && slices.Contains(m.Voters, self) {
		// The leader leaves: hand over to a caught-up target voter first, if there is one
		// yet; otherwise promote first and hand over on a later step.
		for _, v := range m.Voters {
			if slices.Contains(target, v) && m.CaughtUp(v, CatchUpSlack) {
				return MoveStep{Kind: MoveTransfer, To: v}
			}
		}
		if len(promote) == 0 {
			return MoveStep{Kind: MoveWait, Why: "no target voter caught up to hand leadership to"}
		}
	}
	if changes := append(promote, demote...); len(changes) > 0 {
		return MoveStep{Kind: MoveChange, Changes: changes}
	}
	for _, l := range m.Learners {
		if !slices.Contains(target, l) {
			return MoveStep{Kind: MoveChange, Changes: []Change{{Kind: RemoveNode, Node: l}}}
		}
	}
	return MoveStep{Kind: MoveDone}
}

// StepMove takes the next step of moving group id to the voters target on this node, if
// it leads the group, and returns it. A change is proposed without waiting for it (the
// next call sees it applied, or proposes it again if it was lost); a transfer is started.
// Call it again until it returns MoveDone.
func (h *Host) StepMove(id GroupID, target []NodeID) (MoveStep, error) {
	m, err := h.Membership(id)
	if err != nil {
		return MoveStep{}, err
	}
	step := PlanMove(m, target, h.cfg.Node)
	switch step.Kind {
	case MoveChange:
		if _, err := h.ChangeMembershipAsync(id, step.Changes...); err != nil && err != ErrProposalDropped {
			return step, err
		}
	case MoveTransfer:
		if err := h.TransferLeadership(id, step.To); err != nil {
			return step, err
		}
	}
	return step, nil
}
