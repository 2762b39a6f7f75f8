//go:build unix

package server

import "syscall"

// openFileLimit is the soft RLIMIT_NOFILE: how many descriptors this
// process may hold (Go raises the soft limit to the hard one at start).
func openFileLimit() (uint64, bool) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, false
	}
	return uint64(rl.Cur), true
}
