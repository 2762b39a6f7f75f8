package broker

import (
	"context"
	"sync"

	"github.com/sluice-mq/sluice/internal/group"
)

// Linearizable offset reads in a cluster (docs/cluster.md, "Consumer groups").
//
// A controller cut off from the others keeps leading the metadata group until CheckQuorum
// steps it down, up to an election timeout after the majority elected a new one: answered
// from its memory, an OffsetFetch there could miss a commit the new controller took.
// And the coordinator's memory holds changes applied ahead of their commit, which a
// failover may lose. So a fetch in a cluster reads the committed offsets only (the
// journal's coordinator, fed by applied entries), after a barrier entry proposed once the
// fetch arrived has committed: this node led the group at a point after the fetch began,
// and has applied everything committed before it. Concurrent fetches share a barrier; a
// fetch that arrives while one is in flight waits for the next. A barrier costs one
// metadata commit, which OffsetFetch (a group joining, a tool) can afford.

// readBarriers coalesces the barriers of concurrent reads.
type readBarriers struct {
	mu      sync.Mutex
	running bool
	waiting []chan error // the reads the next barrier answers
}

// ConfirmCoordinator is CheckCoordinator for a read that must see every offset commit
// acknowledged before it (OffsetFetch): in a cluster it also waits for a barrier
// proposed after the call began to commit.
func (b *Broker) ConfirmCoordinator(ctx context.Context) error {
	if err := b.CheckCoordinator(ctx); err != nil || b.cluster == nil {
		return err
	}
	g, err := b.groups()
	if err != nil {
		return err
	}
	return g.cl.confirm(ctx)
}

func (c *clusterGroups) confirm(ctx context.Context) error {
	done := make(chan error, 1)
	c.reads.mu.Lock()
	c.reads.waiting = append(c.reads.waiting, done)
	if !c.reads.running {
		c.reads.running = true
		go c.runBarriers()
	}
	c.reads.mu.Unlock()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// runBarriers proposes one barrier for the reads waiting, answers them, and goes on while
// more arrived meanwhile.
func (c *clusterGroups) runBarriers() {
	for {
		c.reads.mu.Lock()
		batch := c.reads.waiting
		c.reads.waiting = nil
		if len(batch) == 0 {
			c.reads.running = false
			c.reads.mu.Unlock()
			return
		}
		c.reads.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), coordinatorReadyTimeout)
		err := c.cat.ProposeGroupOffsets(ctx, nil)
		cancel()
		if err != nil {
			err = c.mapErr(err)
		}
		for _, done := range batch {
			done <- err
		}
	}
}

// committedLocked is the coordinator whose offsets were committed: on a single node the
// coordinator itself (it answers a commit once it is durable), in a cluster the journal's
// (applied entries only). Called with g.mu held.
func (g *groupRT) committedLocked() *group.Coordinator {
	if g.cl != nil {
		return g.cl.journaled
	}
	return g.coord
}
