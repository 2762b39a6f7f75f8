package multiraft

import (
	"errors"
	"fmt"
)

var (
	// ErrGroupUnknown: this node hosts no such group.
	ErrGroupUnknown = errors.New("multiraft: group unknown on this node")
	// ErrGroupExists: CreateGroup of a group this node already hosts.
	ErrGroupExists = errors.New("multiraft: group already exists on this node")
	// ErrProposalDropped: raft refused the proposal, or an entry of another term was
	// committed at its index. It was not applied; retrying may succeed.
	ErrProposalDropped = errors.New("multiraft: proposal dropped")
	// ErrStopped: the host is closed.
	ErrStopped = errors.New("multiraft: host stopped")
	// ErrRemoved: this node is no longer a member of the group.
	ErrRemoved = errors.New("multiraft: node removed from group")
)

// NotLeaderError refuses a proposal made on a node that does not lead the group. Leader is
// the node this one believes leads it, or 0 when it knows of none (an election is on).
type NotLeaderError struct {
	Group  GroupID
	Leader NodeID
}

func (e *NotLeaderError) Error() string {
	if e.Leader == 0 {
		return fmt.Sprintf("multiraft: group %d: not leader, leader unknown", e.Group)
	}
	return fmt.Sprintf("multiraft: group %d: not leader, leader is node %d", e.Group, e.Leader)
}
