package meta

import (
	"encoding/binary"
	"maps"
	"slices"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

func (c *Command) encodeMembership(b []byte) []byte {
	switch c.Op {
	case OpAddNode:
		b = binary.AppendUvarint(b, uint64(c.Node.ID))
		b = appendString(b, c.Addr)
	case OpRemoveNode:
		b = binary.AppendUvarint(b, uint64(c.Node.ID))
	case OpMoveReplica:
		b = binary.AppendUvarint(b, uint64(c.Group))
		b = binary.AppendUvarint(b, uint64(c.From))
		b = binary.AppendUvarint(b, uint64(c.To))
	case OpCancelReassign:
		b = binary.AppendUvarint(b, uint64(c.Group))
	case OpMoveDone, OpReassign:
		b = binary.AppendUvarint(b, uint64(c.Group))
		b = appendNodes(b, c.Replicas)
	}
	return b
}

func (c *Command) decodeMembership(d *decoder) {
	switch c.Op {
	case OpAddNode:
		c.Node.ID = multiraft.NodeID(d.Uvarint())
		c.Addr = string(d.Bytes(MaxAddr))
	case OpRemoveNode:
		c.Node.ID = multiraft.NodeID(d.Uvarint())
	case OpMoveReplica:
		c.Group = multiraft.GroupID(d.Uvarint())
		c.From = multiraft.NodeID(d.Uvarint())
		c.To = multiraft.NodeID(d.Uvarint())
	case OpCancelReassign:
		c.Group = multiraft.GroupID(d.Uvarint())
	case OpMoveDone, OpReassign:
		c.Group = multiraft.GroupID(d.Uvarint())
		c.Replicas = d.nodes()
	}
}

func appendNodes(b []byte, ns []multiraft.NodeID) []byte {
	b = binary.AppendUvarint(b, uint64(len(ns)))
	for _, n := range ns {
		b = binary.AppendUvarint(b, uint64(n))
	}
	return b
}

// nodes reads a list of at most MaxReplicas node ids.
func (d *decoder) nodes() []multiraft.NodeID {
	n := d.count()
	if d.Err == nil && n > MaxReplicas {
		d.Fail("%d nodes", n)
		return nil
	}
	var out []multiraft.NodeID
	for i := uint64(0); i < n && d.Err == nil; i++ {
		out = append(out, multiraft.NodeID(d.Uvarint()))
	}
	return out
}

// encodeMembership appends the snapshot's membership section (snapshot.go).
func (s *State) encodeMembership(b []byte) []byte {
	joined := slices.Sorted(maps.Keys(s.Joined))
	b = binary.AppendUvarint(b, uint64(len(joined)))
	for _, id := range joined {
		b = binary.AppendUvarint(b, uint64(id))
		b = appendString(b, s.Joined[id])
	}
	removed := slices.Sorted(maps.Keys(s.Removed))
	b = appendNodes(b, removed)
	var moved []GroupPlacement
	for _, g := range s.Groups() {
		if g.Moved {
			moved = append(moved, g)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(moved)))
	for _, g := range moved {
		b = binary.AppendUvarint(b, uint64(g.Group))
		// Old with one more than its length, 0 for none: nil and empty differ.
		if g.Old == nil {
			b = binary.AppendUvarint(b, 0)
			continue
		}
		b = binary.AppendUvarint(b, uint64(len(g.Old))+1)
		for _, n := range g.Old {
			b = binary.AppendUvarint(b, uint64(n))
		}
	}
	return b
}

// membership reads the snapshot's membership section into s, whose topics and queues it
// may still change (they are not handed out yet).
func (d *decoder) membership(s *State) {
	nj := d.count()
	for i := uint64(0); i < nj && d.Err == nil; i++ {
		id, addr := multiraft.NodeID(d.Uvarint()), string(d.Bytes(MaxAddr))
		if d.Err == nil && (id == 0 || addr == "" || s.Joined[id] != "") {
			d.Fail("joined node %d", id)
		}
		if s.Joined == nil {
			s.Joined = map[multiraft.NodeID]string{}
		}
		s.Joined[id] = addr
	}
	nr := d.count()
	for i := uint64(0); i < nr && d.Err == nil; i++ {
		id := multiraft.NodeID(d.Uvarint())
		if d.Err == nil && (id == 0 || s.Removed[id]) {
			d.Fail("removed node %d", id)
		}
		if s.Removed == nil {
			s.Removed = map[multiraft.NodeID]bool{}
		}
		s.Removed[id] = true
	}
	nm := d.count()
	for i := uint64(0); i < nm && d.Err == nil; i++ {
		id := multiraft.GroupID(d.Uvarint())
		n := d.Uvarint()
		if d.Err == nil && n > MaxReplicas+1 {
			d.Fail("group %d: %d old replicas", id, n)
		}
		var old []multiraft.NodeID
		if n > 0 {
			old = []multiraft.NodeID{}
		}
		for j := uint64(1); j < n && d.Err == nil; j++ {
			old = append(old, multiraft.NodeID(d.Uvarint()))
		}
		if d.Err == nil && !s.markMoved(id, old) {
			d.Fail("moved group %d unknown", id)
		}
	}
}

// markMoved sets a decoded group's move state in place.
func (s *State) markMoved(id multiraft.GroupID, old []multiraft.NodeID) bool {
	for _, t := range s.Topics {
		for i := range t.Partitions {
			if t.Partitions[i].Group == id {
				t.Partitions[i].Old, t.Partitions[i].Moved = old, true
				return true
			}
		}
	}
	for _, q := range s.Queues {
		if q.Group == id {
			q.Old, q.Moved = old, true
			return true
		}
	}
	return false
}
