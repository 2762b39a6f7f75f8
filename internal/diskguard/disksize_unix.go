//go:build linux || darwin

package diskguard

import "syscall"

// osDiskSize is the size in bytes of the file system holding dir, as statfs(2) reports it
// (f_blocks: the whole file system, not what is free); false if it cannot be read.
func osDiskSize(dir string) (int64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return int64(st.Blocks) * int64(st.Bsize), st.Blocks > 0
}
