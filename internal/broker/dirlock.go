package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// One data directory, one broker. Two processes writing the same logs,
// journals and catalog would corrupt each other, so Open takes an exclusive
// flock(2) on Options.Dir/LOCK and holds it until Close. The kernel drops a
// flock when its file is closed, which includes the death of the process
// (kill -9, a crash, the OOM killer): a stale LOCK file never keeps the
// directory locked, so there is nothing to clean up by hand.
//
// flock locks belong to an open file description, not to a process, so a
// second Open of the same directory inside one process is refused too.
//
// The lock is taken only on the real file system (vfs.Default): a MemFS is
// private to its process and has no other writer to keep out.

// ErrDirLocked: another broker (another sluice process, or another Open in
// this one) holds the data directory. Match it with errors.Is.
var ErrDirLocked = errors.New("data directory is locked: another sluice process holds it")

// lockFile is the file, in the data directory, that carries the flock. Its
// contents do not matter; it is never deleted (deleting it would let a new
// broker lock a fresh file while an old one still holds the unlinked one).
const lockFile = "LOCK"

// dirLock is a held lock; nil when no lock was taken (an in-memory FS).
type dirLock struct {
	f *os.File
}

// lockDir takes the exclusive lock on dir, which must exist. It fails at
// once, with ErrDirLocked, if another open file description holds it.
func lockDir(fsys vfs.FS, dir string) (*dirLock, error) {
	if fsys != vfs.Default {
		return nil, nil
	}
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("broker: lock data directory: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err != syscall.EINTR {
			break
		}
	}
	switch {
	case err == nil:
		return &dirLock{f: f}, nil
	case errors.Is(err, syscall.EWOULDBLOCK):
		f.Close()
		return nil, fmt.Errorf("broker: %s: %w (flock on %s)", dir, ErrDirLocked, path)
	default:
		f.Close()
		return nil, fmt.Errorf("broker: lock %s: %w", path, err)
	}
}

// release drops the lock by closing its file. Safe on a nil lock.
func (l *dirLock) release() error {
	if l == nil {
		return nil
	}
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("broker: release data directory lock: %w", err)
	}
	return nil
}
