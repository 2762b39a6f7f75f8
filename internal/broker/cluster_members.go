package broker

import (
	"context"
	"errors"
	"slices"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// AddNode admits node id, whose Raft transport listens at addr, to the cluster (`sluice
// cluster add-node`). It returns once the catalog recorded it; the metadata group's
// leader then adds the node as a learner, promotes it if the group has fewer than three
// voters, and a rebalance moves replicas onto it (cluster_moves.go). The node itself is
// started with --cluster-join and peers naming the members.
func (b *Broker) AddNode(ctx context.Context, id int32, addr string) error {
	c := b.cluster
	if c == nil {
		return ErrNotClustered
	}
	if id <= 0 || addr == "" {
		return invalid("node", "want ID=HOST:PORT with a positive id, got %d=%q", id, addr)
	}
	// A second node at a member's address would never be reached (the member answers
	// for itself, "wrong node id") and every node would warn of it each second; the
	// catalog knows only added nodes' addresses, the transport every peer's.
	if addr == c.addr {
		return invalid("node", "%s is this node's (%d) --cluster-addr: each node has an address of its own", addr, c.node)
	}
	if c.peers != nil {
		if other, ok := c.peers.PeerAt(addr); ok && other != multiraft.NodeID(id) {
			return invalid("node", "%s is node %d's --cluster-addr: each node has an address of its own", addr, other)
		}
	}
	return membershipErr(c.cat.AddNode(ctx, multiraft.NodeID(id), addr))
}

// RemoveNode removes node id (`sluice cluster remove-node`): the catalog re-places every
// replica it holds and the groups' leaders move them; then the metadata group's leader
// takes it out of the metadata group. It returns once the catalog recorded the removal;
// NodeGone says when the node is out of everything.
func (b *Broker) RemoveNode(ctx context.Context, id int32) error {
	c := b.cluster
	if c == nil {
		return ErrNotClustered
	}
	if id <= 0 {
		return invalid("node", "want a positive node id, got %d", id)
	}
	return membershipErr(c.cat.RemoveNode(ctx, multiraft.NodeID(id)))
}

// membershipErr maps the catalog's membership refusals to the broker's errors: a refusal
// is the caller's (InvalidArgument, with the catalog's reason), a NOT_LEADER or unknown
// outcome is the cluster's.
func membershipErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, meta.ErrNoQuorum), errors.Is(err, meta.ErrNodeRemoved), errors.Is(err, meta.ErrNodeExists),
		errors.Is(err, meta.ErrInvalidNode), errors.Is(err, meta.ErrMove):
		return refusal{&InvalidArgumentError{Field: "node", Reason: err.Error()}, err}
	case errors.Is(err, meta.ErrOutcomeUnknown):
		return errors.Join(ErrReplicationUnknown, err)
	}
	return err
}

// refusal is an InvalidArgumentError that still matches the catalog's error.
type refusal struct {
	ia  *InvalidArgumentError
	err error
}

func (r refusal) Error() string   { return r.ia.Error() }
func (r refusal) Unwrap() []error { return []error{r.ia, r.err} }

// MoveState is a replica move in progress, as the catalog records it.
type MoveState struct {
	What     string  `json:"what"` // "topic/partition" or "queue NAME"
	Group    uint64  `json:"group"`
	Replicas []int32 `json:"replicas"` // the target
	Old      []int32 `json:"old"`      // the replicas before the move
}

// MembershipState is the cluster's membership as this node sees it.
type MembershipState struct {
	MetaVoters   []int32     `json:"meta_voters"`
	MetaLearners []int32     `json:"meta_learners,omitempty"`
	Removed      []int32     `json:"removed,omitempty"` // node ids never admitted again
	Moves        []MoveState `json:"moves,omitempty"`
}

func (c *clusterRT) membershipState() MembershipState {
	st := c.meta.State()
	var out MembershipState
	if ms, err := c.host.Membership(meta.Group); err == nil {
		out.MetaVoters, out.MetaLearners = int32s(ms.Voters), int32s(ms.Learners)
	}
	for id := range st.Removed {
		out.Removed = append(out.Removed, int32(id))
	}
	slices.Sort(out.Removed)
	for _, g := range st.Moving() {
		out.Moves = append(out.Moves, MoveState{What: g.What(), Group: uint64(g.Group), Replicas: int32s(g.Replicas), Old: int32s(g.Old)})
	}
	return out
}

func int32s(ns []multiraft.NodeID) []int32 {
	out := make([]int32, 0, len(ns))
	for _, n := range ns {
		out = append(out, int32(n))
	}
	return out
}

var _ meta.GroupOffsetsSnapshotter = (*clusterGroups)(nil)

// SnapshotGroupOffsets gives the metadata snapshot every committed offset this node
// journaled (the journal's coordinator, never what the coordinator applied ahead of a
// commit), so a node added to the cluster, seeded by that snapshot, has them
// (meta/membership_offsets.go).
func (c *clusterGroups) SnapshotGroupOffsets() ([]byte, error) {
	c.g.mu.Lock()
	evs := c.journaled.Snapshot()
	c.g.mu.Unlock()
	if len(evs) == 0 || len(evs) > maxGroupEvents {
		return nil, nil // too many for one payload: left out (docs/cluster.md, "Membership")
	}
	b, err := encodeGroupEvents(evs)
	if err != nil {
		return nil, nil // past meta.MaxGroupOffsets: likewise
	}
	return b, nil
}
