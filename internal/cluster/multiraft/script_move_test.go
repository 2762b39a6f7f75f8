package multiraft_test

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// move takes up to steps steps of moving group g to the voters list ("n1,n2,n4") on
// whichever node leads it then (Host.StepMove), ticking ticks times after each so the step
// lands, and prints one line per step ("n1: learner n4"), only the last (print=last: who
// leads after a crash is raft's random choice) or nothing. until=change stops right after
// the first change proposed, without ticking: the leader can then be killed before the
// change commits. A target node that does not host the group yet starts it empty first
// (as the broker's reconciler does for a node a move names). It stops after "done".
func (s *script) move(g multiraft.GroupID, list string, kv map[string]string) string {
	var target []multiraft.NodeID
	for _, w := range strings.Split(list, ",") {
		target = append(target, s.node(w))
	}
	for _, t := range target {
		if nd := s.c.nodes[t]; nd.up && !slices.Contains(nd.groups, g) {
			s.c.createGroup(g, []multiraft.NodeID{t}, nil)
		}
	}
	var out []string
	for range s.num(kv, "steps", 1) {
		lead, _ := s.c.leader(g)
		if lead == 0 {
			out = append(out, "no leader")
		} else {
			step, err := s.c.nodes[lead].host.StepMove(g, target)
			if err != nil {
				out = append(out, fmt.Sprintf("n%d: error: %v", lead, err))
			} else {
				out = append(out, fmt.Sprintf("n%d: %s", lead, step))
			}
			if err == nil && step.Kind == multiraft.MoveDone {
				break
			}
			if err == nil && step.Kind == multiraft.MoveChange && kv["until"] == "change" {
				break
			}
		}
		for range s.num(kv, "ticks", 3) {
			s.c.tick()
		}
	}
	switch kv["print"] {
	case "none":
		return ""
	case "last":
		_, last, _ := strings.Cut(out[len(out)-1], ": ")
		return last
	}
	return strings.Join(out, "\n")
}

// voters prints each up node's configuration of g, whoever leads.
func (s *script) voters(g multiraft.GroupID) string {
	var out []string
	for _, nd := range s.c.up() {
		m, err := nd.host.Membership(g)
		if err != nil {
			out = append(out, fmt.Sprintf("n%d: %v", nd.id, err))
			continue
		}
		line := fmt.Sprintf("n%d: voters=%s", nd.id, names(m.Voters))
		if len(m.Learners) > 0 {
			line += " learners=" + names(m.Learners)
		}
		if m.Joint() {
			line += " joint"
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}
