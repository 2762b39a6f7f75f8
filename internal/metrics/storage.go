package metrics

import "github.com/prometheus/client_golang/prometheus"

// StorageStat is the broker's storage as a whole at scrape time.
type StorageStat struct {
	OpenFiles, MaxOpenFiles int    // descriptors the logs hold, and their bound
	FileEvictions           uint64 // files closed to make room
	CorruptBatches          uint64 // damaged batches quarantined since the start
	WriteFailing            bool   // the disk is full or failing (/readyz says why)
	// DiskFreeBytes and DiskSizeBytes are the data directory's file
	// system: bytes an unprivileged writer may still use, and its size.
	// DiskSizeBytes 0: unknown (not measured on this OS), not reported.
	DiskFreeBytes, DiskSizeBytes uint64
	// Replica pulls (a cluster): records a partition replica behind its group's snapshot
	// fetched from a peer's log. ReplicaPullRemaining is the offsets the pulls under way
	// still lack (0: none under way).
	ReplicaPulls, ReplicaPullBytes, ReplicaPullFailures uint64
	ReplicaPullRemaining                                int64
}

// StorageSource is a Source that also reports storage; SourceFuncs is one
// when its Storage func is set.
type StorageSource interface {
	StorageStats() (StorageStat, bool)
}

// StorageStats reports f.Storage's answer; ok is false without one.
func (f SourceFuncs) StorageStats() (StorageStat, bool) {
	if f.Storage == nil {
		return StorageStat{}, false
	}
	return f.Storage(), true
}

var (
	storageOpenFiles = desc("storage_open_files", "File descriptors the logs hold open now (segment and index files, through one cache).")
	storageMaxFiles  = desc("storage_open_files_limit", "The bound on storage_open_files.")
	storageEvictions = desc("storage_file_evictions_total", "Files closed to make room in the descriptor cache.")
	storageCorrupt   = desc("storage_corrupt_batches_total", "Damaged batches found (checksum, length, framing) and quarantined: their offsets are skipped by every reader.")
	storageFailing   = desc("storage_write_failing", "1 while the disk is full or answers I/O errors (sends are refused while full), else 0.")
	storageDiskFree  = desc("storage_disk_free_bytes", "Bytes still available to sluice on the data directory's file system (statfs f_bavail), the headroom file not counted as free.")
	storageDiskSize  = desc("storage_disk_size_bytes", "Size of the data directory's file system.")
	replicaPulls     = desc("replica_pulls_total", "Pulls of records by a partition replica whose local log was behind its Raft group's snapshot (a new or wiped replica, a follower past the compacted Raft log).")
	replicaPullBytes = desc("replica_pull_bytes_total", "Record bytes those pulls fetched from peers.")
	replicaPullFails = desc("replica_pull_failures_total", "Pull requests a peer did not answer, or answered with an error (the next peer is tried).")
	replicaPullLeft  = desc("replica_pull_remaining_offsets", "Offsets the pulls under way still lack: the progress of a replica being seeded.")
)

func collectStorage(ch chan<- prometheus.Metric, s StorageStat) {
	failing := 0.0
	if s.WriteFailing {
		failing = 1
	}
	ch <- prometheus.MustNewConstMetric(storageOpenFiles, prometheus.GaugeValue, float64(s.OpenFiles))
	ch <- prometheus.MustNewConstMetric(storageMaxFiles, prometheus.GaugeValue, float64(s.MaxOpenFiles))
	ch <- prometheus.MustNewConstMetric(storageEvictions, prometheus.CounterValue, float64(s.FileEvictions))
	ch <- prometheus.MustNewConstMetric(storageCorrupt, prometheus.CounterValue, float64(s.CorruptBatches))
	ch <- prometheus.MustNewConstMetric(storageFailing, prometheus.GaugeValue, failing)
	ch <- prometheus.MustNewConstMetric(replicaPulls, prometheus.CounterValue, float64(s.ReplicaPulls))
	ch <- prometheus.MustNewConstMetric(replicaPullBytes, prometheus.CounterValue, float64(s.ReplicaPullBytes))
	ch <- prometheus.MustNewConstMetric(replicaPullFails, prometheus.CounterValue, float64(s.ReplicaPullFailures))
	ch <- prometheus.MustNewConstMetric(replicaPullLeft, prometheus.GaugeValue, float64(s.ReplicaPullRemaining))
	if s.DiskSizeBytes > 0 {
		ch <- prometheus.MustNewConstMetric(storageDiskFree, prometheus.GaugeValue, float64(s.DiskFreeBytes))
		ch <- prometheus.MustNewConstMetric(storageDiskSize, prometheus.GaugeValue, float64(s.DiskSizeBytes))
	}
}
