package multiraft

import (
	"sync"

	"go.etcd.io/raft/v3/raftpb"
)

// maxCachedBytes bounds one group's entry cache (by raft's Entry.Size). A group applies
// what it commits in the same or the next Ready round, so the cache normally holds one or
// two rounds' entries; the bound only matters for a group that cannot apply (stopped) or a
// follower far behind its leader's commit, whose oldest entries are then read from disk.
const maxCachedBytes = 8 << 20

// cachedStorage is a group's Storage as the host and raft use it: the engine's, plus the
// entries this node appended and has not applied yet, kept in memory and served from
// there. Raft reads a committed entry back through Entries to hand it to apply once the
// entry left its unstable log (a leader's entries a round after they were synced, a
// follower's when the commit index arrives after them: under W1 every entry): without the
// cache each such read is a read(2) of the Raft log, a CRC check and a fresh copy of the
// entry for the GC, on every replica, for bytes this process wrote a moment ago.
//
// The cached Data are the very slices raft handed to Append (and keeps in its own
// memory): nobody writes into an entry's data (state machines only read it), so sharing
// them is safe. An entry leaves the cache once applied (trim), when compacted, when a
// snapshot replaces the log, or when the bound is passed; Entries of a range the cache
// does not wholly hold go to the engine, which is always right: the cache is never the
// only copy of anything.
type cachedStorage struct {
	Storage // the engine's: writes go through to it, and Sync is given it

	max   int // maxCachedBytes (smaller in tests)
	mu    sync.Mutex
	ents  []raftpb.Entry // consecutive indexes; empty when nothing is cached
	bytes int            // sum of ents' Size
}

func newCachedStorage(st Storage) *cachedStorage {
	return &cachedStorage{Storage: st, max: maxCachedBytes}
}

// Append writes entries to the engine, then caches them. A cached suffix they replace is
// dropped first, so a concurrent Entries never serves the entries being overwritten (it
// reads the engine's, which orders its own reads and writes).
func (c *cachedStorage) Append(entries []raftpb.Entry) error {
	if len(entries) == 0 {
		return c.Storage.Append(entries)
	}
	first := entries[0].Index
	c.mu.Lock()
	c.cutLocked(first)
	c.mu.Unlock()
	if err := c.Storage.Append(entries); err != nil {
		c.reset()
		return err
	}
	start, err := c.Storage.FirstIndex() // the engine skips entries below it
	if err != nil {
		c.reset()
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.ents); n > 0 && c.ents[n-1].Index+1 != first {
		c.resetLocked() // not contiguous with what is cached (a cut below it): start again
	}
	for _, e := range entries {
		if e.Index >= start {
			c.ents = append(c.ents, e)
			c.bytes += e.Size()
		}
	}
	for len(c.ents) > 1 && c.bytes > c.max {
		c.dropFirstLocked(1)
	}
	return nil
}

// Entries implements raft.Storage: from the cache when it holds all of [lo, hi), with the
// engine's size rule (at least one entry, then as many as fit in maxSize); otherwise from
// the engine. The slice returned is a new one (raft may append to it); the entries' data
// are shared.
func (c *cachedStorage) Entries(lo, hi, maxSize uint64) ([]raftpb.Entry, error) {
	c.mu.Lock()
	if n := len(c.ents); n > 0 && lo < hi && lo >= c.ents[0].Index && hi <= c.ents[n-1].Index+1 {
		s := c.ents[lo-c.ents[0].Index : hi-c.ents[0].Index]
		k, size := 1, uint64(s[0].Size())
		for ; k < len(s); k++ {
			if size += uint64(s[k].Size()); size > maxSize {
				break
			}
		}
		out := make([]raftpb.Entry, k)
		copy(out, s)
		c.mu.Unlock()
		return out, nil
	}
	c.mu.Unlock()
	return c.Storage.Entries(lo, hi, maxSize)
}

// ApplySnapshot replaces the log: nothing cached survives it.
func (c *cachedStorage) ApplySnapshot(snap raftpb.Snapshot) error {
	c.reset()
	return c.Storage.ApplySnapshot(snap)
}

// Compact discards the log up to i, cached entries included.
func (c *cachedStorage) Compact(i uint64) error {
	c.trim(i)
	return c.Storage.Compact(i)
}

// trim drops the cached entries up to index i: applied, raft will not ask for them again
// but for a lagging follower, which the engine serves.
func (c *cachedStorage) trim(i uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.ents) == 0 || i < c.ents[0].Index {
		return
	}
	c.dropFirstLocked(int(min(i-c.ents[0].Index+1, uint64(len(c.ents)))))
}

// cutLocked drops the cached entries at index i and after.
func (c *cachedStorage) cutLocked(i uint64) {
	if len(c.ents) == 0 || i > c.ents[len(c.ents)-1].Index {
		return
	}
	if i <= c.ents[0].Index {
		c.resetLocked()
		return
	}
	k := int(i - c.ents[0].Index)
	for _, e := range c.ents[k:] {
		c.bytes -= e.Size()
	}
	clear(c.ents[k:]) // let their data go
	c.ents = c.ents[:k]
}

// dropFirstLocked drops the n oldest cached entries.
func (c *cachedStorage) dropFirstLocked(n int) {
	if n >= len(c.ents) {
		c.resetLocked()
		return
	}
	for _, e := range c.ents[:n] {
		c.bytes -= e.Size()
	}
	clear(c.ents[:n]) // let their data go while the array lives on
	c.ents = c.ents[n:]
}

func (c *cachedStorage) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resetLocked()
}

func (c *cachedStorage) resetLocked() { c.ents, c.bytes = nil, 0 }
