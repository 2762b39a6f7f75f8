package raftstore

import (
	"errors"
	"fmt"
	"sync"
)

// Sync makes every write to the given groups durable: each group's log is
// fdatasynced, then its state file replaced if its HardState or ConfState
// changed, so a durable commit index never passes the durable log. Groups
// are synced concurrently, at most Options.SyncConcurrency at a time, so a
// Ready round over many groups costs about one fdatasync round trip on a
// disk that serves concurrent syncs (see docs/benchmarks.md, "Raft
// storage"), not one per group.
//
// A group whose sync fails is failed (Err) and refuses writes until it is
// closed and opened again: an fdatasync error is final. The error names
// every group that failed; the others are durable.
func (s *Store) Sync(groups ...*Group) error {
	if len(groups) == 1 {
		return groups[0].sync()
	}
	errs := make([]error, len(groups))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(s.opts.SyncConcurrency, len(groups)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				errs[k] = groups[k].sync()
			}
		}()
	}
	for k := range groups {
		work <- k
	}
	close(work)
	wg.Wait()
	return errors.Join(errs...)
}

// Sync is Store.Sync of this group alone.
func (g *Group) Sync() error { return g.sync() }

func (g *Group) sync() error {
	g.pmu.Lock()
	defer g.pmu.Unlock()
	g.mu.Lock()
	if err := g.writableLocked(); err != nil {
		g.mu.Unlock()
		return err
	}
	// Everything appended before this point is covered by the log sync
	// below, and hs was staged after the entries it commits.
	logDirty, dirty := g.logDirty, g.dirty
	g.logDirty = false
	g.mu.Unlock()
	if logDirty {
		if err := g.log.Sync(); err != nil {
			g.fail(fmt.Errorf("raftstore: group %d: sync log: %w", g.id, err))
			return g.Err()
		}
	}
	if !dirty {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.writeStateLocked(g.stateForFile(g.hs))
}
