package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"syscall"
	"time"
)

// ErrCrashed is returned by every method of a MemFS file that was opened
// before the MemFS crashed. errors.Is(ErrCrashed, os.ErrClosed) holds.
var ErrCrashed = fmt.Errorf("vfs: file opened before a simulated crash: %w", os.ErrClosed)

// TornGarbleMax is the most trailing bytes CrashWithTornWrites may garble in
// the unsynced prefix it keeps.
const TornGarbleMax = 8

// memFile is a handle on a memNode. All its fields after name are guarded by
// fs.mu.
type memFile struct {
	fs     *MemFS
	n      *memNode
	name   string
	epoch  uint64
	write  bool
	closed bool
}

// newFile returns a handle on n. Caller holds m.mu.
func (m *MemFS) newFile(n *memNode, name string, write bool) *memFile {
	return &memFile{fs: m, n: n, name: name, epoch: m.epoch, write: write}
}

// usable reports why f cannot be used, if it cannot. Caller holds f.fs.mu.
func (f *memFile) usable(op string) error {
	if f.closed {
		return pathErr(op, f.name, os.ErrClosed)
	}
	if f.epoch != f.fs.epoch {
		return pathErr(op, f.name, ErrCrashed)
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.usable("read"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("readat", f.name, errors.New("negative offset"))
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Write appends p to the file.
func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.usable("write"); err != nil {
		return 0, err
	}
	if !f.write {
		return 0, pathErr("write", f.name, syscall.EBADF)
	}
	f.n.data = append(f.n.data, p...)
	f.n.modTime = time.Now()
	return len(p), nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return pathErr("close", f.name, os.ErrClosed)
	}
	f.closed = true
	return nil
}

// Sync makes the file's current contents durable. It does not make the
// file's directory entry durable: that takes SyncDir.
func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.usable("sync"); err != nil {
		return err
	}
	f.n.synced = f.n.data[:len(f.n.data):len(f.n.data)]
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.usable("truncate"); err != nil {
		return err
	}
	if !f.write {
		return pathErr("truncate", f.name, syscall.EINVAL)
	}
	if size < 0 {
		return pathErr("truncate", f.name, syscall.EINVAL)
	}
	cur := int64(len(f.n.data))
	switch {
	case size < cur:
		// A fresh array keeps the invariant: later appends must not
		// overwrite bytes that synced (or a crash copy) still shares.
		f.n.data = bytes.Clone(f.n.data[:size])
	case size > cur:
		f.n.data = append(f.n.data, make([]byte, size-cur)...)
	}
	f.n.modTime = time.Now()
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.usable("stat"); err != nil {
		return 0, err
	}
	return int64(len(f.n.data)), nil
}

func (f *memFile) Name() string { return f.name }

// Crash simulates a power cut in place: every write not followed by a
// File.Sync and every create, remove or rename not followed by a SyncDir of
// its directory is undone, and every file opened before the crash fails with
// ErrCrashed from now on.
func (m *MemFS) Crash() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.root = durableCopy(m.root, nil, map[*memNode]*memNode{})
	m.epoch++
}

// CrashClone returns a new MemFS holding what a power cut would leave of m
// now, and leaves m and its open files untouched. A test can crash the same
// history at several points by cloning as it goes.
func (m *MemFS) CrashClone() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	return &MemFS{root: durableCopy(m.root, nil, map[*memNode]*memNode{})}
}

// CrashWithTornWrites is Crash, except that a file whose unsynced changes
// are only appends keeps its synced bytes plus a random-length prefix
// (possibly empty, possibly all) of the unsynced bytes, and when that prefix
// is not empty, up to TornGarbleMax of its last bytes may be garbled: the
// disk persisted part of an in-flight write, and the last sector of it may
// hold garbage. A file that was truncated since its last sync goes back to
// its synced contents. Directory changes follow Crash exactly. The outcome
// is a function of rng's state, so a seed reproduces a failure.
func (m *MemFS) CrashWithTornWrites(rng *rand.Rand) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.root = durableCopy(m.root, rng, map[*memNode]*memNode{})
	m.epoch++
}

// durableCopy builds the tree a power cut would leave of n: its synced
// entries, each reduced to its synced contents (plus a torn tail when rng is
// not nil). memo keeps a node reachable under two names one node. Caller
// holds the MemFS mutex.
func durableCopy(n *memNode, rng *rand.Rand, memo map[*memNode]*memNode) *memNode {
	if c, ok := memo[n]; ok {
		return c
	}
	c := &memNode{isDir: n.isDir, modTime: n.modTime}
	memo[n] = c
	if n.isDir {
		c.children = make(map[string]*memNode, len(n.syncedChildren))
		// Sorted, so that the rng is consumed in the same order every run.
		for _, name := range slices.Sorted(maps.Keys(n.syncedChildren)) {
			c.children[name] = durableCopy(n.syncedChildren[name], rng, memo)
		}
		c.syncedChildren = maps.Clone(c.children)
		return c
	}
	c.data = n.synced[:len(n.synced):len(n.synced)]
	if rng != nil {
		c.data = tornTail(n.synced, n.data, rng)
	}
	c.synced = c.data[:len(c.data):len(c.data)]
	return c
}

// tornTail returns synced plus a random prefix of what data appended to it,
// possibly with its last bytes garbled. If data does not extend synced, it
// returns synced.
func tornTail(synced, data []byte, rng *rand.Rand) []byte {
	if len(data) <= len(synced) || !bytes.Equal(data[:len(synced)], synced) {
		return synced[:len(synced):len(synced)]
	}
	tail := data[len(synced):]
	k := rng.IntN(len(tail) + 1)
	out := make([]byte, len(synced)+k)
	copy(out, synced)
	copy(out[len(synced):], tail[:k])
	if k > 0 && rng.IntN(2) == 0 {
		g := 1 + rng.IntN(min(k, TornGarbleMax))
		for i := len(out) - g; i < len(out); i++ {
			out[i] ^= byte(1 + rng.IntN(255)) // never 0: a garbled byte differs
		}
	}
	return out
}
