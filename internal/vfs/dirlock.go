package vfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// One data directory, one owner. Two processes writing the same logs,
// journals and catalog would corrupt each other, so the broker's Open takes
// an exclusive flock(2) on <dir>/LOCK (LockDir) and holds it until Close. The kernel drops a
// flock when its file is closed, which includes the death of the process
// (kill -9, a crash, the OOM killer): a stale LOCK file never keeps the
// directory locked, so there is nothing to clean up by hand.
//
// flock locks belong to an open file description, not to a process, so a
// second lock of the same directory inside one process is refused too.
//
// The lock is taken only on the real file system (Default): a MemFS is
// private to its process and has no other writer to keep out.

// ErrDirLocked: another owner (another sluice process, or another broker in
// this one) holds the directory. Match it with errors.Is.
var ErrDirLocked = errors.New("data directory is locked: another sluice process holds it")

// LockFile is the file, in the data directory, that carries the flock. Its
// contents do not matter; it is never deleted (deleting it would let a new
// broker lock a fresh file while an old one still holds the unlinked one).
const LockFile = "LOCK"

// DirLock is a held lock; nil when no lock was taken (an in-memory FS).
type DirLock struct {
	f *os.File
}

// LockDir takes the exclusive lock on dir, which must exist. It fails at
// once, with ErrDirLocked, if another open file description holds it.
func LockDir(fsys FS, dir string) (*DirLock, error) {
	if fsys != Default {
		return nil, nil
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, FilePerm)
	if err != nil {
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err != syscall.EINTR {
			break
		}
	}
	switch {
	case err == nil:
		return &DirLock{f: f}, nil
	case errors.Is(err, syscall.EWOULDBLOCK):
		f.Close()
		return nil, fmt.Errorf("%s: %w (flock on %s)", dir, ErrDirLocked, path)
	default:
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
}

// Release drops the lock by closing its file. Safe on a nil lock.
func (l *DirLock) Release() error {
	if l == nil {
		return nil
	}
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("release data directory lock: %w", err)
	}
	return nil
}
