package meta

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// Membership (docs/cluster.md, "Membership"): the catalog records which nodes were added
// (their Raft transport address), which were removed (never admitted again: a node id,
// which is also its Raft replica id in every group, is never reused), and for every group
// whose replica set is changing the replicas it had before (Old) beside the ones it is to
// have (Replicas). The catalog only records intent; the group's leader drives the actual
// configuration change (the broker's mover), checked against the group's ConfState, and
// reports it done with OpMoveDone. Every node hosts a group while it is in Replicas or Old.

// Membership refusals, computed in apply.
var (
	// ErrNodeRemoved: the node id was removed from the cluster and may not come back.
	ErrNodeRemoved = errors.New("meta: node was removed from the cluster (node ids are never reused: give the node a new id)")
	// ErrNodeExists: AddNode of a node already a member at another address.
	ErrNodeExists = errors.New("meta: node is already a member")
	// ErrNoQuorum: removing the node would leave a group without somewhere to keep its
	// replicas, so without a quorum once the node is gone.
	ErrNoQuorum = errors.New("meta: removing the node would leave a group with too few nodes to keep its replicas")
	// ErrMove: a replica move the catalog refused (the group is moving already, the nodes
	// are not what the move assumes).
	ErrMove = errors.New("meta: replica move refused")
)

// Membership ops (Command.Node.ID and Command.Addr, or Command.Group/From/To/Replicas).
const (
	OpAddNode     Op = 10 // a node joins: its id and Raft address
	OpRemoveNode  Op = 11 // a node leaves: its replicas are re-placed on the others
	OpMoveReplica Op = 12 // one replica of Group moves From a node To another
	OpMoveDone    Op = 13 // Group's configuration reached Replicas: the move is over
)

// MaxReplicas bounds a decoded replica list.
const MaxReplicas = 64

// Members are the nodes the catalog counts as members (registered and not removed).
func (s *State) members() []multiraft.NodeID {
	ids := make([]multiraft.NodeID, 0, len(s.Nodes))
	for _, n := range s.Nodes {
		if !s.Removed[n.ID] {
			ids = append(ids, n.ID)
		}
	}
	return ids
}

// GroupPlacement is one data group (a partition's or a queue's) as the catalog places it.
type GroupPlacement struct {
	Group    multiraft.GroupID
	Topic    string // "" for a queue
	Index    int    // the partition, for a topic
	Queue    string // "" for a partition
	Replicas []multiraft.NodeID
	Old      []multiraft.NodeID // non-nil while a move is in progress
	Moved    bool
	Pinned   bool               // placed by an operator: Rebalance never moves it
	Original []multiraft.NodeID // Partition.Original
}

// What names the group for people: "topic/partition" or "queue NAME".
func (g GroupPlacement) What() string {
	if g.Queue != "" {
		return "queue " + g.Queue
	}
	return fmt.Sprintf("%s/%d", g.Topic, g.Index)
}

// Groups lists every data group, by group id.
func (s *State) Groups() []GroupPlacement { return s.placements(false) }

// placements lists the groups' placements by group id: all, or only those moving.
func (s *State) placements(movingOnly bool) []GroupPlacement {
	var out []GroupPlacement
	for name, t := range s.Topics {
		for i, p := range t.Partitions {
			if !movingOnly || p.Old != nil {
				out = append(out, GroupPlacement{Group: p.Group, Topic: name, Index: i, Replicas: p.Replicas, Old: p.Old, Moved: p.Moved, Pinned: p.Pinned, Original: p.Original})
			}
		}
	}
	for name, q := range s.Queues {
		if !movingOnly || q.Old != nil {
			out = append(out, GroupPlacement{Group: q.Group, Queue: name, Replicas: q.Replicas, Old: q.Old, Moved: q.Moved, Pinned: q.Pinned, Original: q.Original})
		}
	}
	slices.SortFunc(out, func(a, b GroupPlacement) int { return cmpID(a.Group, b.Group) })
	return out
}

// Hosts reports whether node n must host group g's replica: it is in Replicas or, during
// a move, in Old.
func (g GroupPlacement) Hosts(n multiraft.NodeID) bool {
	return slices.Contains(g.Replicas, n) || slices.Contains(g.Old, n)
}

// Listed reports whether node n is told to clients: registered, and not removed or still
// holding replicas (its moves not done).
func (s *State) Listed(n multiraft.NodeID) bool {
	if _, ok := s.Node(n); !ok {
		return false
	}
	return !s.Removed[n] || s.Holds(n)
}

// Holds reports whether any group still places a replica on n (in Replicas or Old).
func (s *State) Holds(n multiraft.NodeID) bool {
	for _, g := range s.Groups() {
		if g.Hosts(n) {
			return true
		}
	}
	return false
}

// setReplicas replaces group id's replicas by reps, remembering the hosting set until the
// move is over (Old is the union of what the group may still have in its configuration),
// pinned or not (Partition.Pinned), with original as the replicas a reassignment started
// from (Partition.Original; nil for other moves).
func (s *State) setReplicas(id multiraft.GroupID, reps []multiraft.NodeID, pinned bool, original []multiraft.NodeID) bool {
	old := func(cur, prev []multiraft.NodeID) []multiraft.NodeID {
		o := slices.Clone(prev)
		for _, r := range cur {
			if !slices.Contains(o, r) {
				o = append(o, r)
			}
		}
		return o
	}
	for name, t := range s.Topics {
		for i, p := range t.Partitions {
			if p.Group != id {
				continue
			}
			nt := *t
			nt.Partitions = slices.Clone(t.Partitions)
			nt.Partitions[i] = Partition{Group: id, Replicas: reps, Old: old(p.Replicas, p.Old), Moved: true, Pinned: pinned, Original: original}
			s.Topics[name] = &nt
			return true
		}
	}
	for name, q := range s.Queues {
		if q.Group == id {
			nq := *q
			nq.Replicas, nq.Old, nq.Moved, nq.Pinned, nq.Original = reps, old(q.Replicas, q.Old), true, pinned, original
			s.Queues[name] = &nq
			return true
		}
	}
	return false
}

// moveDone ends group id's move if its replicas are still reps.
func (s *State) moveDone(id multiraft.GroupID, reps []multiraft.NodeID) Result {
	for name, t := range s.Topics {
		for i, p := range t.Partitions {
			if p.Group == id && p.Old != nil && slices.Equal(p.Replicas, reps) {
				nt := *t
				nt.Partitions = slices.Clone(t.Partitions)
				nt.Partitions[i].Old, nt.Partitions[i].Original = nil, nil
				s.Topics[name] = &nt
			}
		}
	}
	for name, q := range s.Queues {
		if q.Group == id && q.Old != nil && slices.Equal(q.Replicas, reps) {
			nq := *q
			nq.Old, nq.Original = nil, nil
			s.Queues[name] = &nq
		}
	}
	return Result{}
}

// applyMembership runs the membership ops on s.
func (s *State) applyMembership(c *Command) Result {
	switch c.Op {
	case OpAddNode:
		return s.addNode(c.Node.ID, c.Addr)
	case OpRemoveNode:
		return s.removeNode(c.Node.ID)
	case OpMoveReplica:
		return s.moveReplica(c.Group, c.From, c.To)
	case OpReassign:
		return s.reassign(c.Group, c.Replicas) // reassign.go
	case OpCancelReassign:
		return s.cancelReassign(c.Group)
	default: // OpMoveDone
		return s.moveDone(c.Group, c.Replicas)
	}
}

func (s *State) addNode(id multiraft.NodeID, addr string) Result {
	switch {
	case id == 0 || addr == "":
		return Result{Err: fmt.Errorf("%w: node %d at %q", ErrInvalidNode, id, addr)}
	case s.Removed[id]:
		return Result{Err: fmt.Errorf("%w: node %d", ErrNodeRemoved, id)}
	case s.Joined[id] == addr:
		return Result{} // again: the same
	case s.Joined[id] != "":
		return Result{Err: fmt.Errorf("%w: node %d joined at %s", ErrNodeExists, id, s.Joined[id])}
	}
	if _, ok := s.Node(id); ok {
		return Result{Err: fmt.Errorf("%w: node %d is registered already", ErrNodeExists, id)}
	}
	s.Joined = maps.Clone(s.Joined)
	if s.Joined == nil {
		s.Joined = map[multiraft.NodeID]string{}
	}
	s.Joined[id] = addr
	return Result{}
}

// removeNode re-places every replica of node id on the member with the fewest replicas
// that the group does not have yet, and removes id for good. It refuses (and changes
// nothing) when a group has nowhere to go.
func (s *State) removeNode(id multiraft.NodeID) Result {
	if s.Removed[id] {
		return Result{}
	}
	_, registered := s.Node(id)
	if !registered && s.Joined[id] == "" {
		return Result{Err: fmt.Errorf("%w: node %d is not a member", ErrInvalidNode, id)}
	}
	var rest []multiraft.NodeID
	for _, n := range s.members() {
		if n != id {
			rest = append(rest, n)
		}
	}
	if len(rest) == 0 {
		return Result{Err: fmt.Errorf("%w: node %d is the last node", ErrNoQuorum, id)}
	}
	load := s.replicaCounts()
	type move struct {
		g    multiraft.GroupID
		reps []multiraft.NodeID
	}
	var moves []move
	for _, g := range s.Groups() {
		i := slices.Index(g.Replicas, id)
		if i < 0 {
			continue
		}
		to := multiraft.NodeID(0)
		for _, n := range rest {
			if !slices.Contains(g.Replicas, n) && (to == 0 || load[n] < load[to]) {
				to = n
			}
		}
		if to == 0 {
			return Result{Err: fmt.Errorf("%w: %s has %d replicas and only %d other nodes would remain: add a node first",
				ErrNoQuorum, g.What(), len(g.Replicas), len(rest))}
		}
		load[to]++
		reps := slices.Clone(g.Replicas)
		reps[i] = to
		moves = append(moves, move{g.Group, reps})
	}
	for _, m := range moves {
		s.setReplicas(m.g, m.reps, false, nil)
	}
	s.Removed = maps.Clone(s.Removed)
	if s.Removed == nil {
		s.Removed = map[multiraft.NodeID]bool{}
	}
	s.Removed[id] = true
	// It stays in Nodes (its addresses) while it still leads or holds replicas, so clients
	// can reach it until its moves are done; members() leaves it out of every placement,
	// and the broker stops listing it once it holds nothing (State.Listed).
	return Result{}
}

// replicaCounts is how many groups place a replica on each member (Replicas only).
func (s *State) replicaCounts() map[multiraft.NodeID]int {
	load := map[multiraft.NodeID]int{}
	for _, n := range s.members() {
		load[n] = 0
	}
	for _, g := range s.Groups() {
		for _, r := range g.Replicas {
			load[r]++
		}
	}
	return load
}

func (s *State) moveReplica(id multiraft.GroupID, from, to multiraft.NodeID) Result {
	var g *GroupPlacement
	for _, x := range s.Groups() {
		if x.Group == id {
			g = &x
			break
		}
	}
	_, toOK := s.Node(to)
	switch {
	case g == nil:
		return Result{Err: fmt.Errorf("%w: no group %d", ErrMove, id)}
	case g.Old != nil:
		return Result{Err: fmt.Errorf("%w: %s is moving already", ErrMove, g.What())}
	case g.Pinned: // a rebalance planned before an operator's reassignment applied
		return Result{Err: fmt.Errorf("%w: %s was placed by an operator", ErrMove, g.What())}
	case !slices.Contains(g.Replicas, from):
		return Result{Err: fmt.Errorf("%w: node %d holds no replica of %s", ErrMove, from, g.What())}
	case !toOK || s.Removed[to] || slices.Contains(g.Replicas, to):
		return Result{Err: fmt.Errorf("%w: node %d cannot take a replica of %s", ErrMove, to, g.What())}
	}
	reps := slices.Clone(g.Replicas)
	reps[slices.Index(reps, from)] = to
	s.setReplicas(id, reps, false, nil)
	return Result{}
}

// Moving returns the groups with a move in progress.
func (s *State) Moving() []GroupPlacement {
	// Not Groups filtered: the reconciler asks every second, and nearly always nothing
	// moves; building and sorting every placement for that was a tenth of an idle
	// cluster node's CPU with 1,000 partitions.
	return s.placements(true)
}

// Rebalance proposes at most one move that narrows the spread of replica counts over the
// members, if it is wider than one: a replica of a group that movable accepts, and no
// operator pinned, moves from the most loaded member to the least loaded one that lacks it. ok is false when the
// spread is at most one, or nothing can move.
func (s *State) Rebalance(movable func(GroupPlacement) bool) (g multiraft.GroupID, from, to multiraft.NodeID, ok bool) {
	load := s.replicaCounts()
	ids := slices.Sorted(maps.Keys(load))
	if len(ids) < 2 {
		return 0, 0, 0, false
	}
	// Most loaded first, least loaded last; ties by id so every run picks the same.
	slices.SortStableFunc(ids, func(a, b multiraft.NodeID) int { return load[b] - load[a] })
	for _, hi := range ids {
		for j := len(ids) - 1; j >= 0 && load[hi]-load[ids[j]] > 1; j-- {
			lo := ids[j]
			for _, gp := range s.Groups() {
				if gp.Old == nil && !gp.Pinned && slices.Contains(gp.Replicas, hi) && !slices.Contains(gp.Replicas, lo) && movable(gp) {
					return gp.Group, hi, lo, true
				}
			}
		}
	}
	return 0, 0, 0, false
}

// AddNode admits node id, reached by the other nodes' transports at addr (its
// --cluster-addr), to the cluster. The metadata group's leader then adds it to the group
// as a learner (the broker's membership driver), and the node registers its client
// addresses once it has the catalog. It works on any node; an id removed before is
// refused (ErrNodeRemoved), so is an id that is a member already at another address.
func (c *Catalog) AddNode(ctx context.Context, id multiraft.NodeID, addr string) error {
	if len(addr) > MaxAddr {
		return fmt.Errorf("%w: an address longer than %d bytes", ErrInvalidNode, MaxAddr)
	}
	cmd := Command{Op: OpAddNode, Node: Node{ID: id}, Addr: addr}
	// Forwarded, it is done once any AddNode of id applied here: ours, or one that makes
	// ours a refusal, which the State then tells.
	err := c.membership(ctx, cmd, func(s *State) Result { return s.clone().addNode(id, addr) },
		func(s *State) bool { return s.Joined[id] != "" || s.Removed[id] })
	if err != nil {
		return err
	}
	return c.sm.State().clone().addNode(id, addr).Err
}

// RemoveNode removes node id: every replica it holds is re-placed on another member (the
// groups' leaders move them), then the metadata group's leader takes it out of the
// metadata group. It returns once the catalog recorded the removal, not once the moves are
// done (State.Holds tells). It is refused with ErrNoQuorum when some group would have
// nowhere to keep its replicas. Forwarded from a follower, a refusal the leader's newer
// State computes comes back from the forward.
func (c *Catalog) RemoveNode(ctx context.Context, id multiraft.NodeID) error {
	cmd := Command{Op: OpRemoveNode, Node: Node{ID: id}}
	return c.membership(ctx, cmd, func(s *State) Result { return s.clone().removeNode(id) },
		func(s *State) bool { return s.Removed[id] })
}

// MoveReplica moves group g's replica on from to node to (a rebalance). One move per group
// at a time: a group moving already is refused (ErrMove).
func (c *Catalog) MoveReplica(ctx context.Context, g multiraft.GroupID, from, to multiraft.NodeID) error {
	cmd := Command{Op: OpMoveReplica, Group: g, From: from, To: to}
	return c.membership(ctx, cmd, func(s *State) Result { return s.clone().moveReplica(g, from, to) },
		func(s *State) bool {
			for _, gp := range s.Groups() {
				if gp.Group == g {
					return slices.Contains(gp.Replicas, to)
				}
			}
			return true
		})
}

// MoveDone records that group g's configuration is reps, its catalog replicas: the nodes
// only in Old stop hosting it. A group whose replicas changed meanwhile is left as it is.
func (c *Catalog) MoveDone(ctx context.Context, g multiraft.GroupID, reps []multiraft.NodeID) error {
	cmd := Command{Op: OpMoveDone, Group: g, Replicas: reps}
	return c.membership(ctx, cmd, func(*State) Result { return Result{} }, func(s *State) bool {
		for _, gp := range s.Groups() {
			if gp.Group == g {
				return gp.Old == nil || !slices.Equal(gp.Replicas, reps)
			}
		}
		return true
	})
}

// membership proposes cmd on the leader, or on a follower checks it against this node's
// State (check runs apply's own logic on a copy, for the same refusal) and forwards it
// until applied holds.
func (c *Catalog) membership(ctx context.Context, cmd Command, check func(*State) Result, applied func(*State) bool) error {
	_, err := c.do(ctx, cmd)
	if !errors.Is(err, ErrNotLeader) {
		return err
	}
	if r := check(c.sm.State()); r.Err != nil {
		return r.Err
	}
	return c.forward(ctx, cmd, applied)
}
