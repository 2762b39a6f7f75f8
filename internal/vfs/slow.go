package vfs

import (
	"os"
	"sync"
	"time"
)

// SlowSyncFS wraps an FS and makes every File.Sync wait for Delay() before the real sync,
// and records how long each sync took in all: a slow or jittery disk on a fast one, for
// benchmarks of what the disk's latency does to the broker's (issue 19's "with a slow
// disk, the p99 stays within 3× the disk's own fdatasync p99"). Files opened through it
// keep OSFile and Preallocator when the wrapped file has them, so storage takes the same
// paths as on the plain FS. It is safe for concurrent use. It keeps every sync's duration
// (8 bytes each) for as long as it lives: for benchmarks and tests, never for a server.
type SlowSyncFS struct {
	FS
	Delay func() time.Duration // nil: no delay

	mu    sync.Mutex
	syncs []time.Duration
}

// Syncs returns the duration of every File.Sync so far (delay included), in order.
func (s *SlowSyncFS) Syncs() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.syncs...)
}

func (s *SlowSyncFS) wrap(f File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	sf := &slowFile{File: f, fs: s}
	if _, ok := f.(OSFile); ok {
		if _, ok := f.(Preallocator); ok {
			return &slowOSFile{sf}, nil
		}
	}
	return sf, nil
}

// Create implements FS.
func (s *SlowSyncFS) Create(name string) (File, error) { return s.wrap(s.FS.Create(name)) }

// OpenAppend implements FS.
func (s *SlowSyncFS) OpenAppend(name string) (File, error) { return s.wrap(s.FS.OpenAppend(name)) }

// Open implements FS.
func (s *SlowSyncFS) Open(name string) (File, error) { return s.wrap(s.FS.Open(name)) }

type slowFile struct {
	File
	fs *SlowSyncFS
}

// Sync waits for the delay, syncs, and records the whole.
func (f *slowFile) Sync() error {
	start := time.Now()
	if f.fs.Delay != nil {
		if d := f.fs.Delay(); d > 0 {
			time.Sleep(d)
		}
	}
	err := f.File.Sync()
	took := time.Since(start)
	f.fs.mu.Lock()
	f.fs.syncs = append(f.fs.syncs, took)
	f.fs.mu.Unlock()
	return err
}

// slowOSFile is a slowed OS file: it still offers sendfile and preallocation.
type slowOSFile struct{ *slowFile }

func (f *slowOSFile) OSFile() *os.File { return f.File.(OSFile).OSFile() }

func (f *slowOSFile) Preallocate(chunk int64) error {
	return f.File.(Preallocator).Preallocate(chunk)
}
