package producer

import (
	"slices"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
)

// TestIdleSinceAndForget walks one partition's producers through the expiry passes of a
// 16-minute period (a pass a minute): a producer is listed once it recorded nothing for
// the period, counted from the first pass after it was loaded; never while kept (an open
// transaction); and Forget leaves one that wrote again after the listing.
func TestIdleSinceAndForget(t *testing.T) {
	const idle = 16 * time.Minute
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	var ps State
	next := map[int64]int32{}
	base := int64(0)
	record := func(id int64) {
		ps.Lock()
		ps.RecordLocked(batch.Header{ProducerID: id, BaseSequence: next[id]}, base)
		ps.Unlock()
		next[id]++
		base++
	}
	kept := map[int64]bool{}
	pass := func(at time.Duration) []int64 {
		var ids []int64
		for _, x := range ps.IdleSince(t0.Add(at), idle, func(id int64) bool { return kept[id] }) {
			ids = append(ids, x.ID)
		}
		slices.Sort(ids)
		return ids
	}
	record(1) // before any pass: counts from the first
	record(2)
	for _, step := range []struct {
		at     time.Duration
		record []int64
		keep   []int64
		want   []int64
	}{
		{at: 0, want: nil},
		{at: 30 * time.Second, want: nil},                // between passes: not walked
		{at: time.Minute, record: []int64{2}, want: nil}, // 2 writes after this pass
		{at: 15 * time.Minute, want: nil},
		{at: 16 * time.Minute, want: []int64{1}},                                       // 1: idle since the first pass
		{at: 17 * time.Minute, want: []int64{1, 2}},                                    // 2: since the pass at 1m
		{at: 18 * time.Minute, keep: []int64{2}, record: []int64{1}, want: []int64{1}}, // 2 in a transaction now; 1 writes after the pass
	} {
		for _, id := range step.keep {
			kept[id] = true
		}
		got := pass(step.at)
		if !slices.Equal(got, step.want) {
			t.Fatalf("pass at %v: idle %v, want %v", step.at, got, step.want)
		}
		for _, id := range step.record {
			record(id)
		}
	}
	// 1 was listed at 18m with its first batch (base 0), then wrote again: a Forget of
	// that listing keeps it.
	if gone := ps.Forget([]Idle{{ID: 1, LastBase: 0}, {ID: 3, LastBase: 7}}); gone != nil {
		t.Fatalf("Forget of a producer that wrote since, and of an unknown one: forgot %v", gone)
	}
	if got := pass(33 * time.Minute); got != nil {
		t.Fatalf("pass at 33m: idle %v, want none (1 wrote at 18m, 2 is kept)", got)
	}
	idleNow := ps.IdleSince(t0.Add(34*time.Minute), idle, func(id int64) bool { return kept[id] })
	if len(idleNow) != 1 || idleNow[0].ID != 1 {
		t.Fatalf("pass at 34m: %+v, want producer 1 alone (2 is kept)", idleNow)
	}
	if gone := ps.Forget(idleNow); !slices.Equal(gone, []int64{1}) {
		t.Fatalf("Forget: %v forgotten, want [1]", gone)
	}
	if got := ps.Producers(); len(got) != 1 || got[0].ID != 2 {
		t.Fatalf("remembered after Forget: %+v, want producer 2", got)
	}
	if ps.IdleSince(t0.Add(time.Hour), 0, nil) != nil {
		t.Fatal("a period of 0 expires")
	}
}
