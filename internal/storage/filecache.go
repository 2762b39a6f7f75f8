package storage

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// The file cache.
//
// A log holds no file descriptor of its own. Each segment file (.log,
// .index, .timeindex) is a cachedFile: a handle that names the file and
// opens it on demand through the FileCache its log was given, which keeps
// at most MaxOpen descriptors open across every log of the process and
// closes the least recently used one (a CLOCK approximation of LRU: every
// use sets a bit, the sweeping hand gives a file whose bit is set a second
// chance) when it needs room. A file is pinned while an operation uses it
// (a reference count), so the cache never closes a file under a read, a
// write, a sync or a sendfile: pinned files are skipped by the sweep, and if
// every open file is pinned the cache opens one more and catches up later
// (it overshoots by at most the number of operations in flight).
//
// References: pebble's table cache (refcounted readers closed when evicted
// and released) and Kafka's segment files; neither is copied.
//
// The fast path, a file already open, is one compare-and-swap on the
// handle's state and one store of its use bit: no lock shared between logs.

// DefaultMaxOpenFiles is the capacity of a FileCache whose MaxOpen is zero:
// an eighth of the process's RLIMIT_NOFILE, at least 64 and at most 4096.
// The server's three listeners may take a quarter each for connections
// (docs/operations.md); the last quarter is shared by this cache, the
// broker's other files and the operations in flight.
func DefaultMaxOpenFiles() int {
	var rl syscall.Rlimit
	n := 4096
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil && rl.Cur < 8*4096 {
		n = int(rl.Cur / 8)
	}
	return max(n, 64)
}

// DefaultScrubBytesPerSec is how fast the background scrub reads segments
// that nobody has verified since they were opened: about a tenth of the
// synced write bandwidth of the disks this project measures on.
const DefaultScrubBytesPerSec = 32 << 20

// FileCacheOptions configure a FileCache. Zero values take the defaults.
type FileCacheOptions struct {
	// MaxOpen is how many segment and index files may be open at once,
	// across every log using the cache; default DefaultMaxOpenFiles().
	MaxOpen int
	// ScrubBytesPerSec is the rate at which the background scrub verifies
	// the batches of segments no reader has verified since Open; default
	// DefaultScrubBytesPerSec; negative: no background scrub (Log.Scrub
	// still works).
	ScrubBytesPerSec int64
}

// FileCache bounds the file descriptors of the logs that share it, and
// runs their background scrub. One per process (or per broker) is the
// intent; Options.Files selects it, DefaultFileCache() is the default.
// It is safe for concurrent use and needs no Close.
type FileCache struct {
	max int

	mu   sync.Mutex
	ring []*cachedFile // open files, in clock order
	hand int
	open int // descriptors open or reserved (ring plus transient and opening)

	opens, evictions, peak atomic.Int64
	corrupt                atomic.Int64 // batches quarantined since the process started

	scrub scrubber
}

// NewFileCache returns a cache with the given limits.
func NewFileCache(o FileCacheOptions) *FileCache {
	if o.MaxOpen <= 0 {
		o.MaxOpen = DefaultMaxOpenFiles()
	}
	if o.ScrubBytesPerSec == 0 {
		o.ScrubBytesPerSec = DefaultScrubBytesPerSec
	}
	c := &FileCache{max: o.MaxOpen}
	c.scrub.rate = o.ScrubBytesPerSec
	return c
}

var defaultCache = sync.OnceValue(func() *FileCache { return NewFileCache(FileCacheOptions{}) })

// DefaultFileCache is the cache of logs whose Options.Files is nil: one per
// process, with the default limits.
func DefaultFileCache() *FileCache { return defaultCache() }

// FileCacheStats is what a FileCache has done, for metrics.
type FileCacheStats struct {
	MaxOpen   int   // the capacity
	Open      int   // descriptors open now
	Peak      int64 // most descriptors open at once
	Opens     int64 // files opened or created (a reopen after an eviction counts)
	Evictions int64 // files closed to make room
	// CorruptBatches counts damaged batches found and quarantined by the
	// logs of this cache since the process started
	// (sluice_storage_corrupt_batches_total).
	CorruptBatches int64
}

// Stats reports the cache's counters.
func (c *FileCache) Stats() FileCacheStats {
	c.mu.Lock()
	open := c.open
	c.mu.Unlock()
	return FileCacheStats{MaxOpen: c.max, Open: open, Peak: c.peak.Load(), Opens: c.opens.Load(),
		Evictions: c.evictions.Load(), CorruptBatches: c.corrupt.Load()}
}

// errFileGone: the file's segment was deleted or its log closed.
var errFileGone = errors.New("storage: segment file no longer in use")

// Handle states: a reference count in the low bits, and flags.
const (
	refMask     = 1<<40 - 1
	flagOpen    = 1 << 40 // f is open
	flagClosing = 1 << 41 // the cache is closing f; wait on closeDone
	flagGone    = 1 << 42 // dropped: no new references; closed at the last release
)

// cachedFile is one file that the cache opens on demand. It implements
// vfs.File: each call pins the open file for its duration (Close drops the
// handle).
type cachedFile struct {
	c    *FileCache
	fs   vfs.FS
	path string

	state atomic.Int64
	used  atomic.Bool // the clock's reference bit
	f     vfs.File    // valid while flagOpen is set and a reference is held

	mu       sync.Mutex // serializes opening
	prealloc int64      // applied at every open (vfs.Preallocator); guarded by mu

	// guarded by c.mu
	ringIdx   int
	closeDone chan struct{}
}

// handle returns a closed handle on path.
func (c *FileCache) handle(fs vfs.FS, path string) *cachedFile {
	return &cachedFile{c: c, fs: fs, path: path, ringIdx: -1}
}

// create makes path empty (creating it) and returns its handle, open.
func (c *FileCache) create(fs vfs.FS, path string) (*cachedFile, error) {
	h := c.handle(fs, path)
	c.reserve()
	f, err := fs.Create(path)
	if err != nil {
		c.unreserve()
		return nil, err
	}
	c.opens.Add(1)
	c.publish(h, f, 0)
	return h, nil
}

// withFile opens path read-only for fn and closes it, within the cache's
// budget: the short reads of index files and of the quarantine list.
func (c *FileCache) withFile(fs vfs.FS, path string, fn func(vfs.File) error) error {
	c.reserve()
	defer c.unreserve()
	f, err := fs.Open(path)
	if err != nil {
		return err
	}
	c.opens.Add(1)
	err = fn(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// reserve counts a descriptor about to be opened and closes unpinned files
// until the count is within the capacity again.
func (c *FileCache) reserve() {
	c.mu.Lock()
	c.open++
	victims := c.evictLocked()
	if int64(c.open) > c.peak.Load() {
		c.peak.Store(int64(c.open))
	}
	c.mu.Unlock()
	for _, v := range victims {
		v.finishClose()
	}
}

func (c *FileCache) unreserve() {
	c.mu.Lock()
	c.open--
	c.mu.Unlock()
}

// publish enters a freshly opened file in the ring with refs references.
func (c *FileCache) publish(h *cachedFile, f vfs.File, refs int64) {
	h.f = f
	h.used.Store(true)
	c.mu.Lock()
	h.ringIdx = len(c.ring)
	c.ring = append(c.ring, h)
	h.state.Add(flagOpen + refs)
	c.mu.Unlock()
}

// evictLocked picks unpinned files to close while more than max are open,
// sweeping the clock at most twice round. Called with c.mu held; the caller
// closes the victims after unlocking.
func (c *FileCache) evictLocked() []*cachedFile {
	var victims []*cachedFile
	for sweep := 2 * len(c.ring); c.open > c.max && sweep > 0 && len(c.ring) > 0; sweep-- {
		if c.hand >= len(c.ring) {
			c.hand = 0
		}
		h := c.ring[c.hand]
		s := h.state.Load()
		if s&refMask != 0 || s&flagClosing != 0 {
			c.hand++
			continue
		}
		if h.used.Swap(false) && s&flagGone == 0 {
			c.hand++ // second chance
			continue
		}
		if !h.state.CompareAndSwap(s, s|flagClosing) {
			c.hand++
			continue
		}
		c.unringLocked(h) // the hand now points at the file moved into h's place
		h.closeDone = make(chan struct{})
		c.open--
		c.evictions.Add(1)
		victims = append(victims, h)
	}
	return victims
}

// unringLocked removes h from the ring. Called with c.mu held.
func (c *FileCache) unringLocked(h *cachedFile) {
	i, last := h.ringIdx, len(c.ring)-1
	c.ring[i] = c.ring[last]
	c.ring[i].ringIdx = i
	c.ring[last] = nil
	c.ring = c.ring[:last]
	h.ringIdx = -1
}

// acquire pins the open file, opening it if the cache had closed it.
func (h *cachedFile) acquire() (vfs.File, error) {
	for {
		s := h.state.Load()
		if s&flagGone != 0 {
			return nil, h.goneErr()
		}
		if s&flagOpen == 0 || s&flagClosing != 0 {
			return h.acquireSlow()
		}
		if h.state.CompareAndSwap(s, s+1) {
			if !h.used.Load() {
				h.used.Store(true)
			}
			return h.f, nil
		}
	}
}

func (h *cachedFile) goneErr() error {
	return fmt.Errorf("%w: %s", errFileGone, h.path)
}

// acquireSlow waits for a closing to finish and opens the file.
func (h *cachedFile) acquireSlow() (vfs.File, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for {
		s := h.state.Load()
		switch {
		case s&flagGone != 0:
			return nil, h.goneErr()
		case s&flagClosing != 0:
			h.c.mu.Lock()
			ch := h.closeDone
			h.c.mu.Unlock()
			if ch != nil {
				<-ch
			}
			continue
		case s&flagOpen != 0:
			if h.state.CompareAndSwap(s, s+1) {
				return h.f, nil
			}
			continue
		}
		break
	}
	h.c.reserve()
	f, err := h.fs.OpenAppend(h.path)
	if err != nil {
		h.c.unreserve()
		return nil, err
	}
	h.c.opens.Add(1)
	if h.prealloc > 0 {
		if p, ok := f.(vfs.Preallocator); ok {
			p.Preallocate(h.prealloc) // on failure appends grow the file, as without it
		}
	}
	h.c.publish(h, f, 1)
	return f, nil
}

// release unpins the file; the last release of a dropped handle closes it.
func (h *cachedFile) release() {
	s := h.state.Add(-1)
	if s&flagGone != 0 && s&refMask == 0 && s&flagOpen != 0 && s&flagClosing == 0 {
		h.closeIfIdle()
	}
}

// closeIfIdle closes an open, unpinned file now.
func (h *cachedFile) closeIfIdle() {
	c := h.c
	c.mu.Lock()
	s := h.state.Load()
	if s&refMask != 0 || s&flagOpen == 0 || s&flagClosing != 0 || !h.state.CompareAndSwap(s, s|flagClosing) {
		c.mu.Unlock()
		return
	}
	c.unringLocked(h)
	h.closeDone = make(chan struct{})
	c.open--
	c.mu.Unlock()
	h.finishClose()
}

// finishClose closes a file marked closing and wakes whoever waits to
// reopen it.
func (h *cachedFile) finishClose() error {
	err := h.f.Close()
	c := h.c
	c.mu.Lock()
	h.f = nil
	for {
		s := h.state.Load()
		if h.state.CompareAndSwap(s, s&^(flagOpen|flagClosing)) {
			break
		}
	}
	close(h.closeDone)
	h.closeDone = nil
	c.mu.Unlock()
	return err
}

// drop ends the handle: no new references; the file is closed now if
// unpinned, else at its last release. For Close of a log and deletion of a
// segment (a reader still holding the file finishes its read).
func (h *cachedFile) drop() {
	for {
		s := h.state.Load()
		if s&flagGone != 0 {
			return
		}
		if h.state.CompareAndSwap(s, s|flagGone) {
			if s&refMask == 0 && s&flagOpen != 0 && s&flagClosing == 0 {
				h.closeIfIdle()
			}
			return
		}
	}
}

// setPrealloc makes the file preallocate chunk bytes ahead of its appends
// from now on, including after the cache reopens it, if its file system can
// (vfs.Preallocator); 0 stops it for later opens.
func (h *cachedFile) setPrealloc(chunk int64) error {
	if chunk <= 0 {
		h.mu.Lock()
		h.prealloc = 0
		h.mu.Unlock()
		return nil
	}
	f, err := h.acquire()
	if err != nil {
		return err
	}
	defer h.release()
	p, ok := f.(vfs.Preallocator)
	if !ok {
		return nil
	}
	h.mu.Lock()
	h.prealloc = chunk
	h.mu.Unlock()
	return p.Preallocate(chunk)
}

// preallocates reports whether the file writes zeros ahead of its appends.
func (h *cachedFile) preallocates() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.prealloc > 0
}

// The vfs.File methods: each pins the file for its duration.

func (h *cachedFile) ReadAt(p []byte, off int64) (int, error) {
	f, err := h.acquire()
	if err != nil {
		return 0, err
	}
	defer h.release()
	return f.ReadAt(p, off)
}

func (h *cachedFile) Write(p []byte) (int, error) {
	f, err := h.acquire()
	if err != nil {
		return 0, err
	}
	defer h.release()
	return f.Write(p)
}

func (h *cachedFile) Sync() error {
	f, err := h.acquire()
	if err != nil {
		return err
	}
	defer h.release()
	return f.Sync()
}

func (h *cachedFile) Truncate(size int64) error {
	f, err := h.acquire()
	if err != nil {
		return err
	}
	defer h.release()
	return f.Truncate(size)
}

func (h *cachedFile) Size() (int64, error) {
	f, err := h.acquire()
	if err != nil {
		return 0, err
	}
	defer h.release()
	return f.Size()
}

func (h *cachedFile) Name() string { return h.path }

// Close drops the handle (see drop).
func (h *cachedFile) Close() error {
	h.drop()
	return nil
}

var _ vfs.File = (*cachedFile)(nil)
