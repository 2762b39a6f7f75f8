package raftstore

import (
	"errors"
	"fmt"
	"sync"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// Sync makes every write to the given groups durable, in two steps:
//
//  1. each group's log is fdatasynced (and its state file replaced, if its
//     ConfState changed), the groups concurrently, at most
//     Options.SyncConcurrency at a time;
//  2. the HardStates that changed, of all the groups at once, are appended
//     to the node's HardState log with one write, and one fdatasync if any
//     of them changed a term or a vote (hswal.go). A HardState that only
//     moved its commit index is written but not synced: raft needs the
//     commit index on disk for nothing (a restarted replica learns it
//     again from its leader, and Open never lets it fall below the
//     snapshot), and under load nearly every round only moves it, so
//     syncing it would cost every round a second fdatasync after the
//     log's (docs/cluster.md, "Group commit across groups").
//
// So a durable commit index never passes its durable log, and a Ready
// round over many groups costs about one concurrent round of log
// fdatasyncs plus one more (docs/benchmarks.md, "Raft storage").
//
// A group whose sync fails is failed (Err) and refuses writes until it is
// closed and opened again: an fdatasync error is final. A failed write of
// the HardState log fails every group of that Sync whose HardState it
// held, and the log itself refuses writes until the Store is reopened;
// except a write the disk had no room for (ENOSPC, EDQUOT): nothing is
// failed, the groups' HardStates stay staged, and a later Sync of the same
// groups writes them (multiraft retries the round once there is room).
// The error names every group that failed; the others are durable.
func (s *Store) Sync(groups ...*Group) error {
	errs := make([]error, len(groups))
	recs := make([]*walRec, len(groups))
	if len(groups) == 1 {
		recs[0], errs[0] = groups[0].syncLog()
	} else {
		s.forEach(len(groups), func(k int) { recs[k], errs[k] = groups[k].syncLog() })
	}
	var batch []walRec
	must := false
	for _, r := range recs {
		if r != nil {
			batch = append(batch, *r)
			must = must || r.must
		}
	}
	werr := s.wal.write(batch, must)
	for k, r := range recs {
		if r == nil || (werr == nil && !must) {
			continue // (written, not synced: not durable yet)
		}
		g := groups[k]
		if werr != nil && vfs.NoSpace(werr) {
			// Not written, and the log is still whole (hswal.write): the group's
			// HardState waits for the next Sync, which the caller retries.
			g.stageHardStateAgain()
			errs[k] = fmt.Errorf("raftstore: group %d: %w", g.id, werr)
			continue
		}
		if werr != nil {
			g.fail(fmt.Errorf("raftstore: group %d: %w", g.id, werr))
			errs[k] = g.Err()
			continue
		}
		g.noteDurable(*r)
	}
	return errors.Join(errs...)
}

// forEach runs fn(0…n-1) on at most SyncConcurrency goroutines.
func (s *Store) forEach(n int, fn func(int)) {
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(s.opts.SyncConcurrency, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				fn(k)
			}
		}()
	}
	for k := range n {
		work <- k
	}
	close(work)
	wg.Wait()
}

// Sync is Store.Sync of this group alone.
func (g *Group) Sync() error { return g.store.Sync(g) }

// syncLog is a group's first step of Sync: it takes the staged HardState
// (numbered, for the HardState log), then fdatasyncs the log, which covers
// every entry appended before, so the HardState commits nothing that is
// not durable once the log is.
func (g *Group) syncLog() (*walRec, error) {
	g.pmu.Lock()
	defer g.pmu.Unlock()
	g.mu.Lock()
	if err := g.writableLocked(); err != nil {
		g.mu.Unlock()
		return nil, err
	}
	var rec *walRec
	if g.hsDirty {
		rec = &walRec{group: g.id, seq: g.store.nextSeq(), hs: g.hs,
			must: g.hs.Term != g.disk.hs.Term || g.hs.Vote != g.disk.hs.Vote}
		g.hsDirty = false
	}
	logDirty, csDirty := g.logDirty, g.csDirty
	g.logDirty = false
	g.mu.Unlock()
	if logDirty {
		if err := g.log.Sync(); err != nil {
			g.fail(fmt.Errorf("raftstore: group %d: sync log: %w", g.id, err))
			return nil, g.Err()
		}
	}
	if csDirty {
		g.mu.Lock()
		err := g.writeStateFull(g.stateForFile(), true) // csDirty stays set on failure
		if err != nil && rec != nil {
			g.hsDirty = true // not written either: a retried Sync writes it
		}
		g.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	return rec, nil
}

// stageHardStateAgain marks the group's HardState as not yet written: a Sync whose
// HardState log had no room for it gave it back.
func (g *Group) stageHardStateAgain() {
	g.pmu.Lock()
	defer g.pmu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hsDirty = true
}

// noteDurable records that the HardState log holds r.
func (g *Group) noteDurable(r walRec) {
	g.pmu.Lock()
	defer g.pmu.Unlock()
	if r.seq > g.disk.hsSeq {
		g.disk.hs, g.disk.hsSeq = r.hs, r.seq
	}
}
