package load

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// subBuckets is the number of linear buckets per power of two: each
// recorded value lands in a bucket less than 1% wide, which is finer than
// the run-to-run noise of any broker measured here, in a fixed 60 KiB.
const (
	subBits    = 7
	subBuckets = 1 << subBits
	numBuckets = (64 - subBits + 1) * subBuckets
)

// Hist is a log-linear latency histogram. Record is lock-free so every
// worker writes the same one; memory stays fixed however long the run.
type Hist struct {
	counts [numBuckets]atomic.Uint64
	n      atomic.Uint64
	max    atomic.Int64
}

func bucketOf(v uint64) int {
	if v < subBuckets {
		return int(v)
	}
	e := bits.Len64(v) - subBits - 1 // shift that leaves the top subBits+1 bits
	return (e+1)*subBuckets + int(v>>e) - subBuckets
}

// valueOf is the midpoint of bucket i, in nanoseconds.
func valueOf(i int) int64 {
	if i < subBuckets {
		return int64(i)
	}
	e := i/subBuckets - 1
	m := uint64(i%subBuckets + subBuckets)
	return int64(m<<e + (uint64(1)<<e)/2)
}

// Record adds one observation; negative durations count as zero.
func (h *Hist) Record(d time.Duration) { h.RecordN(d, 1) }

// RecordN adds n observations of d (a batch acknowledged together).
func (h *Hist) RecordN(d time.Duration, n int) {
	if d < 0 {
		d = 0
	}
	h.counts[bucketOf(uint64(d))].Add(uint64(n))
	h.n.Add(uint64(n))
	for {
		m := h.max.Load()
		if int64(d) <= m || h.max.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

// Count is the number of observations.
func (h *Hist) Count() uint64 { return h.n.Load() }

// Quantile returns the q-quantile (0..1); the maximum is exact.
func (h *Hist) Quantile(q float64) time.Duration {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	if q >= 1 {
		return time.Duration(h.max.Load())
	}
	rank := uint64(q*float64(n)) + 1
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			return min(time.Duration(valueOf(i)), time.Duration(h.max.Load()))
		}
	}
	return time.Duration(h.max.Load())
}

// Summary is a histogram's quantiles in milliseconds, as the report shows
// them.
type Summary struct {
	What  string  `json:"what"` // which interval was measured
	Count uint64  `json:"count"`
	P50   float64 `json:"p50_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p999_ms"`
	Max   float64 `json:"max_ms"`
}

// Summarize reads h into a Summary.
func (h *Hist) Summarize(what string) Summary {
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	return Summary{What: what, Count: h.Count(), P50: ms(h.Quantile(0.5)), P99: ms(h.Quantile(0.99)),
		P999: ms(h.Quantile(0.999)), Max: ms(h.Quantile(1))}
}
