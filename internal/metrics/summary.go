package metrics

import (
	"math"

	dto "github.com/prometheus/client_model/go"
)

// FsyncSummary is the fdatasync latency since the process started, as the
// console and `sluice admin node` show it: quantiles estimated from the
// histogram's buckets (linear within a bucket, as Prometheus's
// histogram_quantile does), so they are as coarse as the buckets (a factor
// of two).
type FsyncSummary struct {
	Count       uint64  `json:"count"`
	MeanSeconds float64 `json:"mean_seconds"`
	P50Seconds  float64 `json:"p50_seconds"`
	P99Seconds  float64 `json:"p99_seconds"`
}

// Fsyncs summarizes the fdatasyncs observed so far.
func (m *Metrics) Fsyncs() FsyncSummary {
	var d dto.Metric
	if err := m.fsync.Write(&d); err != nil || d.Histogram == nil {
		return FsyncSummary{}
	}
	h := d.Histogram
	s := FsyncSummary{Count: h.GetSampleCount()}
	if s.Count == 0 {
		return s
	}
	s.MeanSeconds = h.GetSampleSum() / float64(s.Count)
	s.P50Seconds = quantile(h, 0.50)
	s.P99Seconds = quantile(h, 0.99)
	return s
}

// quantile estimates the q-quantile of h: the bucket holding the rank, and a
// linear guess inside it; a rank past the last bound answers that bound.
func quantile(h *dto.Histogram, q float64) float64 {
	rank := q * float64(h.GetSampleCount())
	lower, below := 0.0, 0.0
	for _, b := range h.GetBucket() {
		upper, cum := b.GetUpperBound(), float64(b.GetCumulativeCount())
		if cum >= rank {
			if math.IsInf(upper, 1) || cum == below {
				return lower
			}
			return lower + (upper-lower)*(rank-below)/(cum-below)
		}
		lower, below = upper, cum
	}
	return lower
}
