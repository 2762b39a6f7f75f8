package load

import (
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/internal/diskprobe"
)

// Disk is the physical limit a table is read against: the disk's
// append+fdatasync round trips per second and its bandwidth when every
// 1 MiB block is synced (internal/diskprobe).
type Disk struct {
	Dir             string  `json:"dir"`
	FdatasyncPerSec float64 `json:"fdatasync_per_sec"`
	FdatasyncP50Ms  float64 `json:"fdatasync_p50_ms"`
	FdatasyncP99Ms  float64 `json:"fdatasync_p99_ms"`
	SyncedMBPerSec  float64 `json:"synced_mb_per_sec"`
}

// ProbeDisk measures the disk under dir, d per probe.
func ProbeDisk(dir string, d time.Duration) (Disk, error) {
	l, err := diskprobe.Measure(dir, d)
	if err != nil {
		return Disk{Dir: dir}, err
	}
	return Disk{Dir: dir, FdatasyncPerSec: l.FdatasyncPerSec,
		FdatasyncP50Ms: float64(l.FdatasyncP50) / 1e6, FdatasyncP99Ms: float64(l.FdatasyncP99) / 1e6,
		SyncedMBPerSec: l.SyncedBytesPerS / 1e6}, nil
}

// String is the one line printed beside every table.
func (d Disk) String() string {
	return fmt.Sprintf("disk under %s: fdatasync %s/s (p50 %.3f ms, p99 %.3f ms); synced sequential writes %.1f MB/s (1 MiB blocks)",
		d.Dir, Thousands(d.FdatasyncPerSec), d.FdatasyncP50Ms, d.FdatasyncP99Ms, d.SyncedMBPerSec)
}
