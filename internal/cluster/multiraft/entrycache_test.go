package multiraft

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// TestEntryCacheMatchesEngine drives a cachedStorage over MemEngine's storage with random
// appends (overlapping a cached suffix, from a new term, below the cache), trims, compacts
// and snapshots, and after every step compares Entries of every range and several maxSizes
// with the engine's own answer: the cache may only ever answer what the engine would.
func TestEntryCacheMatchesEngine(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			inner, err := NewMemEngine().Group(1)
			if err != nil {
				t.Fatal(err)
			}
			c := newCachedStorage(inner)
			c.max = 16 << 10
			term, applied, cached := uint64(1), uint64(0), 0
			for step := range 400 {
				last, _ := inner.LastIndex()
				first, _ := inner.FirstIndex()
				switch op := rng.IntN(10); {
				case op < 6: // append, possibly cutting back into the log
					at := last + 1
					if last >= first && rng.IntN(3) == 0 {
						at = first + uint64(rng.IntN(int(last-first+1)))
						term++
					}
					at = max(at, applied+1)
					var ents []raftpb.Entry
					for i := range uint64(1 + rng.IntN(4)) {
						data := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, at+i), term)
						ents = append(ents, raftpb.Entry{Index: at + i, Term: term, Data: append(data, make([]byte, rng.IntN(6<<10))...)})
					}
					if err := c.Append(ents); err != nil {
						t.Fatalf("step %d: append at %d: %v", step, at, err)
					}
				case op < 8: // apply some
					if last > applied {
						applied += uint64(1 + rng.IntN(int(last-applied)))
						c.trim(applied)
					}
				case op < 9: // compact below what is applied
					if applied > first {
						if err := c.Compact(first + uint64(rng.IntN(int(applied-first)))); err != nil {
							t.Fatalf("step %d: compact: %v", step, err)
						}
					}
				default: // a snapshot from the leader, ahead of the log
					idx := last + uint64(1+rng.IntN(3))
					if err := c.ApplySnapshot(raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{Index: idx, Term: term}}); err != nil {
						t.Fatalf("step %d: snapshot: %v", step, err)
					}
					applied = idx
				}
				compareEntries(t, step, c, inner)
				if len(c.ents) > 0 {
					cached++
				}
			}
			if cached < 100 {
				t.Fatalf("the cache held entries after %d steps of 400 only", cached)
			}
		})
	}
}

func compareEntries(t *testing.T, step int, c *cachedStorage, inner Storage) {
	t.Helper()
	first, _ := inner.FirstIndex()
	last, _ := inner.LastIndex()
	if c.bytes < 0 || (len(c.ents) > 1 && c.bytes > c.max) {
		t.Fatalf("step %d: cache holds %d bytes in %d entries", step, c.bytes, len(c.ents))
	}
	// The last 40 indexes: where the cache is (the log grows over the run).
	for lo := max(first, last-min(last, 40)); lo <= last; lo++ {
		for hi := lo + 1; hi <= last+1; hi++ {
			for _, max := range []uint64{0, 5 << 10, 12 << 10, 1 << 62} {
				got, gerr := c.Entries(lo, hi, max)
				want, werr := inner.Entries(lo, hi, max)
				if (gerr == nil) != (werr == nil) || !sameEntries(got, want) {
					t.Fatalf("step %d: Entries(%d, %d, %d) = %d entries, %v; engine: %d, %v", step, lo, hi, max, len(got), gerr, len(want), werr)
				}
			}
		}
	}
}

// sameEntries compares index, term and data.
func sameEntries(a, b []raftpb.Entry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Index != b[i].Index || a[i].Term != b[i].Term || !bytes.Equal(a[i].Data, b[i].Data) {
			return false
		}
	}
	return true
}
