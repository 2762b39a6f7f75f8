package vfs

import (
	"errors"
	"syscall"
)

// NoSpace reports whether err is a write the file system had no room for: ENOSPC, or
// EDQUOT for a quota (a real disk's or ErrorFS's). Storage cuts such a write back, so
// unlike an I/O error it can be retried once there is room; the broker's disk guard and
// the Raft layers (raftstore, multiraft, replpart) all tell it apart with this.
func NoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
