package batch

import "testing"

// TestDeleteHorizon: a marker rebuilt with a delete horizon still parses
// as the same marker, keeps its offsets, producer and record timestamp,
// and reports the horizon; a batch without one reports none.
func TestDeleteHorizon(t *testing.T) {
	m, err := BuildMarker(9, 3, false, 7, 1_000)
	if err != nil {
		t.Fatal(err)
	}
	SetBaseOffset(m, 42)
	h0, _ := ParseHeader(m)
	if _, ok := h0.DeleteHorizon(); ok {
		t.Fatal("a new marker reports a delete horizon")
	}
	b, err := WithDeleteHorizon(m, 5_000)
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(b, 0); err != nil {
		t.Fatalf("rebuilt marker invalid: %v", err)
	}
	h, _ := ParseHeader(b)
	if hz, ok := h.DeleteHorizon(); !ok || hz != 5_000 {
		t.Fatalf("horizon %d %v, want 5000", hz, ok)
	}
	if h.BaseOffset != 42 || h.ProducerID != 9 || h.ProducerEpoch != 3 || !h.Control() || !h.Transactional() || h.MaxTimestamp != h0.MaxTimestamp {
		t.Fatalf("header %+v, want the marker's %+v", h, h0)
	}
	if commit, err := ParseMarker(b); err != nil || commit {
		t.Fatalf("ParseMarker: %v %v, want abort", commit, err)
	}
	for r, err := range Records(b) {
		if err != nil || r.Timestamp != 1_000 || r.Offset != 42 {
			t.Fatalf("record %+v %v, want offset 42 at 1000", r, err)
		}
	}
}
