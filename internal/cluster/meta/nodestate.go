package meta

import (
	"context"
	"fmt"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// Whether a node takes leadership, as its peers see it: asked over the metadata group's
// requests. A node refuses it while its disk guard is in its full state (docs/cluster.md,
// "A full disk": it hands the leadership of its partitions and queues to a replica whose
// node takes it, and the leader balancing hands nothing back to it until it has room) and
// while it is stopping ("Stopping a node": it hands every group it leads over first).
// Nothing here is replicated: the answer is the node's own, at the moment it is asked.
//
// On the wire the question is the one first asked as "is your disk full" (the request
// kind requestRefusesLeadership, one byte of answer): a binary from before stopping nodes
// answered it for its disk alone, and every caller already read a yes as "leave it no
// leader".

// SetRefusesLeadership makes this node answer its peers' "do you take leadership" with
// "no" whenever refuses() is true.
func (m *Machine) SetRefusesLeadership(refuses func() bool) { m.refusesLeadership.Store(&refuses) }

func (m *Machine) refusingLeadership() bool {
	f := m.refusesLeadership.Load()
	return f != nil && (*f)()
}

// NodeRefusesLeadership asks node whether it refuses leadership (its disk is full, or it
// is stopping). A node that cannot be asked, or answers no such request (a binary from
// before this request), is an error: the caller decides what not knowing means.
func (c *Catalog) NodeRefusesLeadership(ctx context.Context, node multiraft.NodeID) (bool, error) {
	if node == c.host.Node() {
		return c.sm.refusingLeadership(), nil
	}
	b, err := c.host.Request(ctx, node, Group, []byte{requestRefusesLeadership})
	if err != nil {
		return false, err
	}
	if len(b) != 1 || b[0] > 1 {
		return false, fmt.Errorf("meta: node %d answered %d bytes that say nothing of leadership", node, len(b))
	}
	return b[0] == 1, nil
}

// SetLeadersAnswer makes this node answer its peers' "which groups do you lead" with
// answer(): the broker's encoding of the groups it leads, which meta only carries (a node
// that hosts no replica of a partition or queue learns its leader this way).
func (m *Machine) SetLeadersAnswer(answer func() []byte) { m.leadersAnswer.Store(&answer) }

func (m *Machine) leaders() []byte {
	f := m.leadersAnswer.Load()
	if f == nil {
		return nil
	}
	return (*f)()
}

// NodeLeaders asks node which groups it leads, in the encoding its SetLeadersAnswer
// gives. A node that cannot be asked, or answers no such request (a binary from before
// it), is an error.
func (c *Catalog) NodeLeaders(ctx context.Context, node multiraft.NodeID) ([]byte, error) {
	if node == c.host.Node() {
		return c.sm.leaders(), nil
	}
	return c.host.Request(ctx, node, Group, []byte{requestLeaders})
}
