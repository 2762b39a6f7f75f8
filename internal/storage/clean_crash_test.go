package storage

import (
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testrace"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// TestCleanCrashAtEveryPoint crashes a clean at every file-system
// operation that changes the disk (a snapshot of what a power cut would
// leave, taken before each one) and opens each snapshot: every one must
// open, hold nothing half-swapped, and serve the latest record of every
// key with nothing lost that was live; appending and cleaning again work.
// The log holds committed, aborted and open transactions too: at every
// point both isolation levels see what they must, a rescan finds exactly
// the open transactions, and every producer's last batch is there.
func TestCleanCrashAtEveryPoint(t *testing.T) {
	testrace.NotUnderRace(t)
	for _, tomb := range []float64{0.3} {
		mem := vfs.NewMem()
		efs := vfs.NewErrorFS(mem)
		c := newClock()
		o := compactOptions(t, c)
		o.FS = efs
		l := mustOpen(t, o)
		m := newTxnModel()
		rng := rand.New(rand.NewPCG(3, uint64(tomb*10)))
		// Hot keys updated over and over, and cold keys written once all
		// along the log: their records sit in every segment the swaps
		// replace and remove.
		mixed := func(rounds int) {
			for range rounds {
				m.randomUpdates(t, l, c, rng, 100, 60, tomb)
				m.randomUpdates(t, l, c, rng, 10, 1_000_000, 0)
				m.randomTxnUpdates(t, l, c, rng, 40, 60)
			}
		}
		mixed(12)
		// A first clean, then more updates and time: the second clean both
		// drops superseded records and purges the first one's tombstones
		// and the markers it gave a delete horizon.
		mustClean(t, l, m.cleanOpts(l, CleanOptions{DeleteRetention: time.Second}))
		mixed(8)
		for pid := range m.pending {
			m.endTxn(t, l, c.t.UnixMilli(), pid)
		}
		m.appendTxn(t, l, c.t.UnixMilli(), 100, true, kv{"open", []byte("x")}) // stays open
		m.randomUpdates(t, l, c, rng, 10, 1_000_000, 0)
		c.t = c.t.Add(time.Hour)

		var mu sync.Mutex
		var snaps []*vfs.MemFS
		efs.Inject(vfs.Fault{Match: func(op vfs.Op, path string) bool {
			switch op {
			case vfs.OpCreate, vfs.OpRemove, vfs.OpRename, vfs.OpSyncDir, vfs.OpWrite, vfs.OpSync, vfs.OpTruncate:
				mu.Lock()
				snaps = append(snaps, mem.CrashClone())
				mu.Unlock()
			}
			return false
		}})
		st := mustClean(t, l, m.cleanOpts(l, CleanOptions{DeleteRetention: time.Second}))
		efs.ClearFaults()
		if !st.Cleaned || st.SegmentsIn < 2 || st.MarkersRemoved == 0 || st.AbortedRemoved == 0 {
			t.Fatalf("the clean under test did too little: %+v", st)
		}
		snaps = append(snaps, mem.CrashClone())
		l.Close()
		t.Logf("tombstones %v: %d crash points, %+v", tomb, len(snaps), st)
		for i, snap := range snaps {
			so := o
			so.FS = snap
			l2, err := Open(so)
			if err != nil {
				t.Fatalf("crash point %d: Open: %v", i, err)
			}
			names, _ := snap.List("/p")
			for _, n := range names {
				if strings.HasSuffix(n, swapTmpSuffix) {
					t.Fatalf("crash point %d: %s left after Open", i, n)
				}
			}
			m.checkTxn(t, l2, cleanedEnd(l2))
			m2 := m.clone()
			m2.randomUpdates(t, l2, c, rng, 50, 60, 0)
			forceRoll(t, l2)
			mustClean(t, l2, m2.cleanOpts(l2, CleanOptions{DeleteRetention: time.Second}))
			m2.checkTxnFull(t, l2, min(cleanedEnd(l2), m2.lso(l2)), true)
			l2.Close()
		}
	}
}

func cloneMap[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestCleanDamagedSwapStateRefusesOpen: a cleaner.swap that does not
// decode (damage on disk, since it is written atomically) stops Open
// rather than guess which segment set is whole.
func TestCleanDamagedSwapStateRefusesOpen(t *testing.T) {
	mem := vfs.NewMem()
	o := testOptions(t, mem, "/p")
	l := mustOpen(t, o)
	l.Close()
	if err := writeFileSynced(mem, "/p/"+swapFile, []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(o); err == nil || !strings.Contains(err.Error(), swapFile) {
		t.Fatalf("Open with a damaged %s: %v, want an error naming it", swapFile, err)
	}
}

// FuzzCleanerFiles feeds arbitrary bytes to the decoders of the cleaner's
// two files: cleaner.swap and the .compacted marker. Neither panics; what
// decodes encodes back to the same bytes.
func FuzzCleanerFiles(f *testing.F) {
	f.Add(swapState{base: 5, removed: []int64{9, 12}}.encode())
	f.Add(swapState{}.encode())
	f.Add(encodeMarker(markerInfo{cleanedAt: 1767225600000, tombstones: 3, cleanedTo: 4096}))
	f.Add([]byte("SLCS\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if st, err := decodeSwap(b); err == nil {
			if string(st.encode()) != string(b) {
				t.Fatalf("swap state %+v re-encodes differently", st)
			}
		}
		if mi, err := decodeMarker(b); err == nil {
			if string(encodeMarker(mi)) != string(b) {
				t.Fatalf("marker %+v re-encodes differently", mi)
			}
		}
	})
}

// TestCleanFaults: a write that fails before the commit leaves the old
// segments serving and no .swap file, and the next pass succeeds; a rename
// that fails after the commit fails the log (ErrNeedsRecovery), and the
// reopen finishes the swap. Nothing live is lost either way.
func TestCleanFaults(t *testing.T) {
	for _, tc := range []struct {
		name   string
		op     vfs.Op
		suffix string
		reopen bool
	}{
		{"write of the new segment", vfs.OpWrite, logSuffix + swapTmpSuffix, false},
		{"sync of the new index", vfs.OpSync, indexSuffix + swapTmpSuffix, false},
		{"rename after the commit", vfs.OpRename, markerSuffix + swapTmpSuffix, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			efs := vfs.NewErrorFS(mem)
			c := newClock()
			o := compactOptions(t, c)
			o.FS = efs
			l := mustOpen(t, o)
			defer func() { l.Close() }()
			m := newCompactModel()
			rng := rand.New(rand.NewPCG(4, 4))
			m.randomUpdates(t, l, c, rng, 1500, 40, 0.1)
			efs.Inject(vfs.Fault{Op: tc.op, Count: 1, Match: func(_ vfs.Op, path string) bool { return strings.HasSuffix(path, tc.suffix) }})
			if _, err := l.Clean(CleanOptions{}); err == nil {
				t.Fatal("the clean succeeded through the fault")
			}
			efs.ClearFaults()
			if tc.reopen {
				if !errors.Is(l.Err(), ErrNeedsRecovery) {
					t.Fatalf("log error after a failed swap: %v", l.Err())
				}
				l.Close()
				l = mustOpen(t, o)
			}
			names, _ := mem.List("/p")
			for _, n := range names {
				if strings.HasSuffix(n, swapTmpSuffix) {
					t.Fatalf("%s left behind", n)
				}
			}
			m.check(t, l, 0, false)
			mustClean(t, l, CleanOptions{})
			m.check(t, l, cleanedEnd(l), true)
		})
	}
}
