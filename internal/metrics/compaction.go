package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// CompactionStat is one compacted partition's cleaner state.
type CompactionStat struct {
	Topic      string
	Partition  int32
	DirtyRatio float64   // dirty bytes over cleanable bytes, as the last pass found them
	LastClean  time.Time // zero: not cleaned since the process started
}

// CompactionStats are the cleaner's totals and every compacted partition.
type CompactionStats struct {
	BytesRead, BytesWritten        int64
	AbortedRemoved, MarkersRemoved int64 // records of aborted transactions, transaction markers
	Partitions                     []CompactionStat
}

// CompactionSource is a Source that also reports the compaction cleaner;
// SourceFuncs is one when its Compaction func is set.
type CompactionSource interface {
	CompactionStats() (CompactionStats, bool)
}

// CompactionStats reports f.Compaction's answer; ok is false without one.
func (f SourceFuncs) CompactionStats() (CompactionStats, bool) {
	if f.Compaction == nil {
		return CompactionStats{}, false
	}
	return f.Compaction(), true
}

var (
	compactionRead    = desc("compaction_bytes_read_total", "Bytes the log cleaner read (rate() is its read bandwidth).")
	compactionWritten = desc("compaction_bytes_written_total", "Bytes the log cleaner wrote as cleaned segments.")
	compactionDirty   = desc("compaction_dirty_ratio", "A compacted partition's dirty bytes (not yet cleaned) over its cleanable bytes, at the cleaner's last look.", "topic", "partition")
	compactionAborted = desc("compaction_aborted_records_removed_total", "Records of aborted transactions the log cleaner removed.")
	compactionMarkers = desc("compaction_txn_markers_removed_total", "Transaction markers the log cleaner removed (no record of their transaction left, delete.retention.ms over).")
	compactionLast    = desc("compaction_last_clean_timestamp_seconds", "When the cleaner last rewrote a compacted partition's segments (absent until it has since the start).", "topic", "partition")
)

var compactionDescs = []*prometheus.Desc{compactionRead, compactionWritten, compactionAborted, compactionMarkers, compactionDirty, compactionLast}

func collectCompaction(ch chan<- prometheus.Metric, s CompactionStats) {
	ch <- prometheus.MustNewConstMetric(compactionRead, prometheus.CounterValue, float64(s.BytesRead))
	ch <- prometheus.MustNewConstMetric(compactionWritten, prometheus.CounterValue, float64(s.BytesWritten))
	ch <- prometheus.MustNewConstMetric(compactionAborted, prometheus.CounterValue, float64(s.AbortedRemoved))
	ch <- prometheus.MustNewConstMetric(compactionMarkers, prometheus.CounterValue, float64(s.MarkersRemoved))
	for _, p := range s.Partitions {
		part := strconv.FormatInt(int64(p.Partition), 10)
		ch <- prometheus.MustNewConstMetric(compactionDirty, prometheus.GaugeValue, p.DirtyRatio, p.Topic, part)
		if !p.LastClean.IsZero() {
			ch <- prometheus.MustNewConstMetric(compactionLast, prometheus.GaugeValue, float64(p.LastClean.UnixMilli())/1000, p.Topic, part)
		}
	}
}
