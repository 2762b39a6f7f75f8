//go:build !(linux || darwin)

package diskguard

// DiskSpace is not measured on this OS: 0, 0 (the headroom is used as configured, and
// /metrics leaves the disk gauges out).
func DiskSpace(string) (free, size uint64) { return 0, 0 }
