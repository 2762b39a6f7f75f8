package metrics

import (
	"testing"
	"time"
)

func TestFsyncSummary(t *testing.T) {
	m := New("test")
	if s := m.Fsyncs(); s != (FsyncSummary{}) {
		t.Fatalf("no fsyncs yet: %+v", s)
	}
	// 98 fast fsyncs (~0.1 ms) and 2 slow ones (~50 ms): the median is in the fast
	// bucket, the 99th percentile in the slow one.
	for range 98 {
		m.ObserveFsync(90 * time.Microsecond)
	}
	m.ObserveFsync(50 * time.Millisecond)
	m.ObserveFsync(50 * time.Millisecond)
	s := m.Fsyncs()
	if s.Count != 100 {
		t.Errorf("count %d, want 100", s.Count)
	}
	if want := (98*90e-6 + 2*50e-3) / 100; s.MeanSeconds < want*0.999 || s.MeanSeconds > want*1.001 {
		t.Errorf("mean %g, want %g", s.MeanSeconds, want)
	}
	// Buckets double from 50 µs: 90 µs falls in (50, 100] µs, 50 ms in (25.6, 51.2] ms.
	if s.P50Seconds <= 50e-6 || s.P50Seconds > 100e-6 {
		t.Errorf("p50 %g s, want within (50 µs, 100 µs]", s.P50Seconds)
	}
	if s.P99Seconds <= 25.6e-3 || s.P99Seconds > 51.2e-3 {
		t.Errorf("p99 %g s, want within (25.6 ms, 51.2 ms]", s.P99Seconds)
	}
}
