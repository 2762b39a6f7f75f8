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
	BytesRead, BytesWritten int64
	Partitions              []CompactionStat
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
	compactionLast    = desc("compaction_last_clean_timestamp_seconds", "When the cleaner last rewrote a compacted partition's segments (absent until it has since the start).", "topic", "partition")
)

var compactionDescs = []*prometheus.Desc{compactionRead, compactionWritten, compactionDirty, compactionLast}

func collectCompaction(ch chan<- prometheus.Metric, s CompactionStats) {
	ch <- prometheus.MustNewConstMetric(compactionRead, prometheus.CounterValue, float64(s.BytesRead))
	ch <- prometheus.MustNewConstMetric(compactionWritten, prometheus.CounterValue, float64(s.BytesWritten))
	for _, p := range s.Partitions {
		part := strconv.FormatInt(int64(p.Partition), 10)
		ch <- prometheus.MustNewConstMetric(compactionDirty, prometheus.GaugeValue, p.DirtyRatio, p.Topic, part)
		if !p.LastClean.IsZero() {
			ch <- prometheus.MustNewConstMetric(compactionLast, prometheus.GaugeValue, float64(p.LastClean.UnixMilli())/1000, p.Topic, part)
		}
	}
}
