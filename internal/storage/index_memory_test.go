package storage

import (
	"testing"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// TestSealedIndexLeavesMemory: a sealed segment's index entries are dropped
// from memory (they are in its index files), so a log's memory does not grow
// with the data it holds; a read of that segment loads them back.
func TestSealedIndexLeavesMemory(t *testing.T) {
	o := testOptions(t, vfs.NewMem(), "log")
	o.SegmentBytes = 32 << 10
	o.IndexIntervalBytes = 1024
	l := mustOpen(t, o)
	defer l.Close()
	for i := range 60 {
		mustAppend(t, l, mkBatch(t, 2, 600, int64(i)))
	}
	l.mu.RLock()
	segs := append([]*segment(nil), l.segs...)
	l.mu.RUnlock()
	if len(segs) < 3 {
		t.Fatalf("%d segments: the test needs rolls", len(segs))
	}
	entries := func(s *segment) (bool, int) {
		s.ix.Lock()
		defer s.ix.Unlock()
		return s.index.loaded, len(s.index.offsets) + len(s.index.times)
	}
	for _, s := range segs[:len(segs)-1] {
		if loaded, n := entries(s); loaded || n != 0 {
			t.Fatalf("sealed segment %d holds %d index entries in memory (loaded %v)", s.base, n, loaded)
		}
	}
	if _, n := entries(segs[len(segs)-1]); n == 0 {
		t.Fatal("the active segment has no index entries: the test tests nothing")
	}
	// A read in the middle of the first segment needs its index back.
	if _, err := l.Read(segs[0].base+20, 1<<10); err != nil {
		t.Fatal(err)
	}
	if loaded, n := entries(segs[0]); !loaded || n == 0 {
		t.Fatalf("after a read, first segment loaded %v with %d entries", loaded, n)
	}
}
