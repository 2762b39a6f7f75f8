package meta

import (
	"context"
	"fmt"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// A node's disk, as its peers see it (docs/cluster.md, "A full disk"): whether the node's
// disk guard is in its full state, asked over the metadata group's requests. A node in
// that state hands the leadership of its partitions and queues to a replica whose node
// says it is not, and the leader balancing hands nothing back to it until it has room.
// Nothing here is replicated: the answer is the node's own, at the moment it is asked.

// SetStorageFull makes this node answer its peers' "is your disk full" with full().
func (m *Machine) SetStorageFull(full func() bool) { m.storageFull.Store(&full) }

func (m *Machine) storageIsFull() bool {
	f := m.storageFull.Load()
	return f != nil && (*f)()
}

// NodeStorageFull asks node whether its disk is full. A node that cannot be asked, or
// answers no such request (a binary from before this request), is an error: the caller
// decides what not knowing means.
func (c *Catalog) NodeStorageFull(ctx context.Context, node multiraft.NodeID) (bool, error) {
	if node == c.host.Node() {
		return c.sm.storageIsFull(), nil
	}
	b, err := c.host.Request(ctx, node, Group, []byte{requestStorageFull})
	if err != nil {
		return false, err
	}
	if len(b) != 1 || b[0] > 1 {
		return false, fmt.Errorf("meta: node %d answered %d bytes that are no disk state", node, len(b))
	}
	return b[0] == 1, nil
}
