//go:build linux || darwin

package diskguard

import "syscall"

// DiskSpace is the free and total bytes of the file system holding dir, as statfs(2)
// reports them (free: f_bavail, what an unprivileged writer may still use); 0, 0 if it
// cannot be read. The headroom's cap reads the total; /metrics and the admin API both.
func DiskSpace(dir string) (free, size uint64) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0
	}
	return uint64(st.Bavail) * uint64(st.Bsize), uint64(st.Blocks) * uint64(st.Bsize)
}
