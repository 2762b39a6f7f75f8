package raftstore

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluice-mq/sluice/internal/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// TestReadsDuringWrites: raft.Storage reads run while the group appends
// (with cuts), syncs, snapshots and compacts; under -race this checks the
// locking, and every read must be one the log held: an entry's term is the
// term it was written with, and errors are only raft's compacted and
// unavailable.
func TestReadsDuringWrites(t *testing.T) {
	s := mustOpen(t, testOptions(vfs.NewMem()))
	defer s.Close()
	g := mustGroup(t, s, 1)
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				first, _ := g.FirstIndex()
				last, _ := g.LastIndex()
				if last < first {
					continue
				}
				es, err := g.Entries(first, last+1, 4096)
				if err != nil && err != raft.ErrCompacted && !errors.Is(err, raft.ErrUnavailable) { // a cut may race the read
					errs <- err
					return
				}
				for _, e := range es {
					if len(e.Data) != 2 || uint64(e.Data[1]) != e.Term%256 {
						t.Errorf("entry %d/%d holds %x", e.Index, e.Term, e.Data)
						return
					}
				}
				if _, err := g.Snapshot(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	term := uint64(1)
	for i := uint64(1); i < 400; i++ {
		last, _ := g.LastIndex()
		at := last + 1
		if i%7 == 0 && last > 2 {
			at, term = last-1, term+1 // cut the last two entries
		}
		must(t, g.Append(ents(at, at+2, term)))
		last, _ = g.LastIndex()
		must(t, g.SetHardState(pb.HardState{Term: term, Commit: last - 2}))
		must(t, g.Sync())
		if i%25 == 0 {
			_, err := g.CreateSnapshot(last-2, nil, []byte("sm"))
			must(t, err)
			must(t, g.Compact(last-2))
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
