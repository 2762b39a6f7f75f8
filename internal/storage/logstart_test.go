package storage

import (
	"errors"
	"math"
	"testing"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// TestMoveStart: a start moved inside a segment hides the offsets below it from reads,
// deletes the segments entirely below it, survives a reopen, and never moves back.
func TestMoveStart(t *testing.T) {
	o, l := segmentedLog(t, vfs.NewMem(), newClock()) // 10 segments of 3 offsets: 0..29
	for _, tc := range []struct {
		to, want int64
		err      error
		segs     int
	}{
		{to: 4, want: 4, segs: 9},   // inside segment [3,6): segment [0,3) goes
		{to: 2, want: 4, segs: 9},   // lower: no change
		{to: 4, want: 4, segs: 9},   // the same: no change
		{to: 12, want: 12, segs: 6}, // a segment base
		{to: 31, want: 12, err: ErrOffsetOutOfRange, segs: 6},
		{to: -2, want: 12, err: ErrOffsetOutOfRange, segs: 6},
		{to: 30, want: 30, segs: 1}, // the high watermark: everything, the active segment kept
	} {
		got, err := l.MoveStart(tc.to)
		if got != tc.want || !errors.Is(err, tc.err) || len(l.segs) != tc.segs {
			t.Fatalf("MoveStart(%d) = %d, %v with %d segments; want %d, %v, %d", tc.to, got, err, len(l.segs), tc.want, tc.err, tc.segs)
		}
		if l.LogStartOffset() != tc.want {
			t.Fatalf("MoveStart(%d): LogStartOffset %d", tc.to, l.LogStartOffset())
		}
		if tc.want > 0 {
			if _, err := l.Read(tc.want-1, 10); !errors.Is(err, ErrOffsetOutOfRange) {
				t.Fatalf("after MoveStart(%d): read of %d: %v", tc.to, tc.want-1, err)
			}
		}
		checkAllReadable(t, l)
	}
	l.Close()
	l = mustOpen(t, o)
	defer l.Close()
	if l.LogStartOffset() != 30 || l.HighWatermark() != 30 {
		t.Fatalf("after reopen: start %d, hw %d", l.LogStartOffset(), l.HighWatermark())
	}
	mustAppend(t, l, mkBatch(t, 1, 100, 0))
	if b, err := l.Read(30, 10); err != nil || len(b) == 0 {
		t.Fatalf("append after the moved start: %v", err)
	}
}

// TestMoveStartInsideFirstSegmentSurvivesReopen: the start kept in its file, not a
// segment base, is what Open restores; retention then deleting the segment keeps it.
func TestMoveStartInsideFirstSegmentSurvivesReopen(t *testing.T) {
	o, l := segmentedLog(t, vfs.NewMem(), newClock())
	if _, err := l.MoveStart(1); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = mustOpen(t, o)
	if l.LogStartOffset() != 1 {
		t.Fatalf("start after reopen %d, want 1", l.LogStartOffset())
	}
	if _, err := l.Read(0, 10); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the kept start: %v", err)
	}
	if _, err := l.DeleteBelow(3); err != nil || l.LogStartOffset() != 3 {
		t.Fatalf("DeleteBelow(3): start %d, %v", l.LogStartOffset(), err)
	}
	// Reset restarts the log elsewhere: the kept start is forgotten.
	if err := l.Reset(0); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = mustOpen(t, o)
	defer l.Close()
	if l.LogStartOffset() != 0 {
		t.Fatalf("start after Reset and reopen %d, want 0", l.LogStartOffset())
	}
}

// TestMoveStartCrashAtEveryPoint: a power cut at any file-system step of MoveStart leaves
// the old start or the new one, and the log opens.
func TestMoveStartCrashAtEveryPoint(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem)
	o, l := segmentedLog(t, efs, newClock())
	if _, err := l.MoveStart(4); err != nil {
		t.Fatal(err)
	}
	var snaps []*vfs.MemFS
	efs.Inject(vfs.Fault{Match: func(op vfs.Op, path string) bool {
		switch op {
		case vfs.OpCreate, vfs.OpRemove, vfs.OpRename, vfs.OpSyncDir, vfs.OpWrite, vfs.OpSync, vfs.OpTruncate:
			snaps = append(snaps, mem.CrashClone())
		}
		return false
	}})
	if _, err := l.MoveStart(10); err != nil {
		t.Fatal(err)
	}
	efs.ClearFaults()
	snaps = append(snaps, mem.CrashClone())
	l.Close()
	if len(snaps) < 5 {
		t.Fatalf("only %d crash points", len(snaps))
	}
	for i, snap := range snaps {
		so := o
		so.FS = snap
		l2, err := Open(so)
		if err != nil {
			t.Fatalf("crash point %d: Open: %v", i, err)
		}
		// The new start is kept before any segment below it is deleted.
		if s := l2.LogStartOffset(); s != 4 && s != 10 {
			t.Fatalf("crash point %d: start %d, want 4 or 10", i, s)
		}
		if l2.HighWatermark() != 30 {
			t.Fatalf("crash point %d: hw %d", i, l2.HighWatermark())
		}
		checkAllReadable(t, l2)
		l2.Close()
	}
}

// TestMoveStartDamagedFileRefusesOpen: a kept start that fails its CRC is not guessed.
func TestMoveStartDamagedFileRefusesOpen(t *testing.T) {
	mem := vfs.NewMem()
	o, l := segmentedLog(t, mem, newClock())
	if _, err := l.MoveStart(4); err != nil {
		t.Fatal(err)
	}
	l.Close()
	b, err := readAll(o.Files, mem, "/p/"+startFile)
	if err != nil || len(b) != 12 {
		t.Fatalf("kept start: %x, %v", b, err)
	}
	b[3] ^= 0xff // a flipped bit in the offset
	f, err := mem.Create("/p/" + startFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var ce *CorruptionError
	if _, err := Open(o); !errors.As(err, &ce) {
		t.Fatalf("Open with a damaged start file: %v, want a CorruptionError", err)
	}
}

// TestRaiseStartKeptOnlyByPersist: a raised start hides what lies below it at once, and
// retention keeps it, but a crash before PersistStart brings the old start back with every
// record (the replicated partition re-applies the entry that raised it); after
// PersistStart it survives a crash and the segments below it are gone.
func TestRaiseStartKeptOnlyByPersist(t *testing.T) {
	mem := vfs.NewMem()
	o, l := segmentedLog(t, mem, newClock()) // 10 segments of 3 offsets: 0..29
	if got, err := l.RaiseStart(7); got != 7 || err != nil {
		t.Fatalf("RaiseStart(7) = %d, %v", got, err)
	}
	if l.LogStartOffset() != 7 || len(l.segs) != 10 {
		t.Fatalf("after RaiseStart: start %d, %d segments; want 7 and all 10", l.LogStartOffset(), len(l.segs))
	}
	if _, err := l.Read(6, 10); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the raised start: %v", err)
	}
	if _, err := l.DeleteBelow(3); err != nil || l.LogStartOffset() != 7 {
		t.Fatalf("retention below the raised start moved it to %d (%v), want 7", l.LogStartOffset(), err)
	}
	if got, err := l.RaiseStart(31); got != 7 || !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("RaiseStart past the end = %d, %v", got, err)
	}

	crashed := mem.CrashClone()
	co := o
	co.FS = crashed
	l2 := mustOpen(t, co)
	if l2.LogStartOffset() != 3 {
		t.Fatalf("after a crash before PersistStart: start %d, want 3 (retention's, durable)", l2.LogStartOffset())
	}
	if b, err := l2.Read(3, 10); err != nil || len(b) == 0 {
		t.Fatalf("after a crash: read at 3: %v", err)
	}
	l2.Close()

	if err := l.PersistStartUpTo(math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	if len(l.segs) != 8 { // [6,9) holds 7 and 8: kept
		t.Fatalf("after PersistStart: %d segments, want 8", len(l.segs))
	}
	if err := l.PersistStartUpTo(math.MaxInt64); err != nil { // nothing raised since: nothing to do
		t.Fatal(err)
	}
	crashed = mem.CrashClone()
	l.Close()
	co.FS = crashed
	l3 := mustOpen(t, co)
	defer l3.Close()
	if l3.LogStartOffset() != 7 {
		t.Fatalf("after PersistStart and a crash: start %d, want 7", l3.LogStartOffset())
	}
	checkAllReadable(t, l3)
}

// TestPersistStartUpToACheckpoint: a start made durable for a checkpoint taken when the log
// started at 7 keeps 7 even though a later entry raised it to 13 meanwhile (a crash brings
// back the records 13 hid, for the entries after the checkpoint to find again); it never
// lowers a start already kept (an older checkpoint's, late); PersistStart then keeps 13.
func TestPersistStartUpToACheckpoint(t *testing.T) {
	mem := vfs.NewMem()
	o, l := segmentedLog(t, mem, newClock()) // 10 segments of 3 offsets: 0..29
	defer l.Close()
	startAfterCrash := func(when string, want int64) {
		t.Helper()
		co := o
		co.FS = mem.CrashClone()
		l2 := mustOpen(t, co)
		defer l2.Close()
		if l2.LogStartOffset() != want {
			t.Fatalf("%s, then a crash: start %d, want %d", when, l2.LogStartOffset(), want)
		}
		checkAllReadable(t, l2)
	}
	if _, err := l.RaiseStart(7); err != nil {
		t.Fatal(err)
	}
	if _, err := l.RaiseStart(13); err != nil {
		t.Fatal(err)
	}
	if err := l.PersistStartUpTo(7); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 13 || len(l.segs) != 8 { // [6,9) holds 7 and 8: kept
		t.Fatalf("after PersistStartUpTo(7): start %d with %d segments, want 13 (in memory) with 8", l.LogStartOffset(), len(l.segs))
	}
	startAfterCrash("kept up to 7", 7)
	if err := l.PersistStartUpTo(5); err != nil {
		t.Fatal(err)
	}
	startAfterCrash("an older checkpoint's start made durable late", 7)
	if err := l.PersistStartUpTo(math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	if len(l.segs) != 6 { // [12,15) holds 13 and 14: kept
		t.Fatalf("after PersistStart: %d segments, want 6", len(l.segs))
	}
	startAfterCrash("PersistStart", 13)
}
