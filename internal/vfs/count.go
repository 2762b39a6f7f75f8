package vfs

import (
	"os"
	"sync"
)

// CountingFS wraps an FS and counts the files open through it (how many
// now, and the most at once) and the syncs (File.Sync and SyncDir). Tests
// use it to prove a bound on file descriptors without lowering the
// process's RLIMIT_NOFILE, and to prove that a path does no sync. Files
// opened through it keep OSFile and Preallocator when the wrapped file has
// them. It is safe for concurrent use.
type CountingFS struct {
	FS
	mu         sync.Mutex
	open, peak int
	opened     int64
	syncs      int64
}

// Syncs reports how many File.Sync and SyncDir calls were made.
func (c *CountingFS) Syncs() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.syncs
}

// SyncDir implements FS.
func (c *CountingFS) SyncDir(dir string) error {
	c.mu.Lock()
	c.syncs++
	c.mu.Unlock()
	return c.FS.SyncDir(dir)
}

// NewCountingFS returns fs with its open files counted.
func NewCountingFS(fs FS) *CountingFS { return &CountingFS{FS: fs} }

// Counts reports the files open now, the most open at once, and how many
// were ever opened.
func (c *CountingFS) Counts() (open, peak int, opened int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open, c.peak, c.opened
}

// ResetPeak makes the peak the number open now.
func (c *CountingFS) ResetPeak() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.peak = c.open
}

func (c *CountingFS) wrap(f File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.open++
	c.opened++
	c.peak = max(c.peak, c.open)
	c.mu.Unlock()
	cf := &countFile{File: f, fs: c}
	if _, ok := f.(OSFile); ok {
		if _, ok := f.(Preallocator); ok {
			return &countOSFile{cf}, nil
		}
	}
	return cf, nil
}

// Create implements FS.
func (c *CountingFS) Create(name string) (File, error) { return c.wrap(c.FS.Create(name)) }

// OpenAppend implements FS.
func (c *CountingFS) OpenAppend(name string) (File, error) { return c.wrap(c.FS.OpenAppend(name)) }

// Open implements FS.
func (c *CountingFS) Open(name string) (File, error) { return c.wrap(c.FS.Open(name)) }

type countFile struct {
	File
	fs     *CountingFS
	mu     sync.Mutex
	closed bool
}

// Close counts the file closed once, even if called again.
func (f *countFile) Close() error {
	f.mu.Lock()
	first := !f.closed
	f.closed = true
	f.mu.Unlock()
	if first {
		f.fs.mu.Lock()
		f.fs.open--
		f.fs.mu.Unlock()
	}
	return f.File.Close()
}

// Sync counts the sync.
func (f *countFile) Sync() error {
	f.fs.mu.Lock()
	f.fs.syncs++
	f.fs.mu.Unlock()
	return f.File.Sync()
}

// countOSFile is a counted OS file: it still offers sendfile and
// preallocation.
type countOSFile struct{ *countFile }

func (f *countOSFile) OSFile() *os.File { return f.File.(OSFile).OSFile() }

func (f *countOSFile) Preallocate(chunk int64) error {
	return f.File.(Preallocator).Preallocate(chunk)
}
