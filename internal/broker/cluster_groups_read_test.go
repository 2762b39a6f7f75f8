package broker

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestClusterOffsetReadNeedsQuorum: a coordinator whose messages no longer reach the other
// nodes may still believe it leads (until CheckQuorum steps it down), and CheckCoordinator
// may still pass there; ConfirmCoordinator, what an OffsetFetch waits for, never does:
// its barrier cannot commit. Concurrent reads on a healthy coordinator share barriers and
// all pass.
func TestClusterOffsetReadNeedsQuorum(t *testing.T) {
	c := newMemCluster(t, 3)
	id, b := c.coordinator()
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			errs <- b.ConfirmCoordinator(ctx)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a read on a healthy coordinator: %v", err)
		}
	}

	c.nodes[id].tr.dead.Store(true) // cut off: nothing it sends arrives
	defer c.nodes[id].tr.dead.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	stale := b.CheckCoordinator(ctx)
	if err := b.ConfirmCoordinator(ctx); err == nil {
		t.Fatal("a coordinator cut off from the others confirmed a read")
	}
	t.Logf("cut off: CheckCoordinator said %v", stale)
}
