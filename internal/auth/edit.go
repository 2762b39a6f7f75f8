package auth

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// Edit changes the users file at path under an exclusive lock: it reads
// the file (a missing one is empty), lets fn change it, hardens it (no
// clear password or token is written) and replaces it atomically, 0600.
// Two edits at once (two `sluice user` runs, an SQS AddPermission) take
// turns instead of one losing the other's change. The lock is a flock on
// path+".lock", beside the file: the file itself is replaced by a rename,
// so a lock on it would be a lock on the old inode. An error from fn
// leaves the file as it was.
func Edit(path string, fn func(*File) error) error {
	unlock, err := lockFile(path + ".lock")
	if err != nil {
		return err
	}
	defer unlock()
	f, err := ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = &File{}, nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := fn(f); err != nil {
		return err
	}
	if err := f.Harden(DefaultIterations); err != nil {
		return err
	}
	return WriteFile(path, f)
}

// lockFile takes an exclusive flock on path, waiting for another holder.
// The kernel drops it when the process dies, so a crashed edit never
// leaves the file locked.
func lockFile(path string) (unlock func(), err error) {
	lf, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the users file: %w", err)
	}
	for {
		err = syscall.Flock(int(lf.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		lf.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { lf.Close() }, nil
}
