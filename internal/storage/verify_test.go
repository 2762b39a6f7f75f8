package storage

import "testing"

// TestVerifiedSpans: checked ranges merge when they touch, a segment is
// whole once one range from 0 covers it, gaps are found in order with the
// offset their first batch holds, and a cut keeps what lies before it and
// marks everything after it checked (this process writes it).
func TestVerifiedSpans(t *testing.T) {
	var v verified
	v.reset(-1, 0)
	if g, e, f, ok := v.gap(100, 10); !ok || g != 0 || e != 100 || f != 10 {
		t.Fatalf("gap of nothing checked: %d-%d first %d %v", g, e, f, ok)
	}
	v.add(40, 60, 14, 16, 100)
	v.add(0, 20, 10, 12, 100)
	if !v.covers(45, 60) || v.covers(15, 25) || v.covers(60, 61) {
		t.Fatal("covers")
	}
	if g, e, f, ok := v.gap(100, 10); !ok || g != 20 || e != 40 || f != 12 {
		t.Fatalf("first gap: %d-%d first %d", g, e, f)
	}
	v.add(20, 40, 12, 14, 100)
	if g, e, f, ok := v.gap(100, 10); !ok || g != 60 || e != 100 || f != 16 {
		t.Fatalf("gap after merging: %d-%d first %d", g, e, f)
	}
	if len(v.spans) != 1 {
		t.Fatalf("spans not merged: %+v", v.spans)
	}
	v.add(60, 100, 16, 20, 100)
	if !v.all.Load() {
		t.Fatal("whole segment checked but not marked so")
	}
	var w verified
	w.reset(50, 15) // recovery scanned from 50
	if w.all.Load() || !w.covers(50, 1<<40) || w.covers(0, 10) {
		t.Fatal("recovered segment")
	}
	w.add(0, 30, 10, 13, 200)
	w.cut(20, 12) // truncated at 20
	if !w.covers(0, 20) || !w.covers(20, 1<<40) || !w.all.Load() {
		t.Fatalf("after cut: %+v", w.spans)
	}
}
