package meta

import (
	"bytes"
	"maps"
	"math"
	"strings"
	"testing"
)

// capturingHook is a stateHook that can capture its state: a copy of its groups, built
// into payloads later (GroupStateCapturer).
type capturingHook struct {
	*stateHook
	builds int
}

func (h *capturingHook) CaptureGroupState() func() ([][]byte, bool, error) {
	frozen := &stateHook{groups: maps.Clone(h.groups)}
	return func() ([][]byte, bool, error) {
		h.builds++
		return frozen.GroupState()
	}
}

// TestCaptureSnapshotIsTheSnapshotAtCapture: encoded after the catalog and the groups went
// on changing, a captured snapshot is byte for byte the snapshot taken at its capture; the
// hook is checkpointed and its state built by the encoding, not the capture; the log may be
// compacted behind it. Without a hook that captures, or below LevelGroupState, the capture
// is the snapshot at once.
func TestCaptureSnapshotIsTheSnapshotAtCapture(t *testing.T) {
	m := NewMachine(1)
	h := &capturingHook{stateHook: newStateHook(nil)}
	if err := m.SetGroupOffsets(h); err != nil {
		t.Fatal(err)
	}
	applyAll(t, m, 1, seedCommands()[:3])
	setLevel(t, m, 4, LevelGroupState)
	applyOffsets(t, m, 5, "set a=1;set b=1")
	want, err := m.Snapshot()
	if err != nil || want[0] != snapVersionGroupState {
		t.Fatalf("snapshot: version %d, %v", want[0], err)
	}
	checkpoints, builds := h.checkpoints, h.builds
	encode, err := m.CaptureSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if h.checkpoints != checkpoints || h.builds != builds {
		t.Fatal("the capture checkpointed the hook or built its state: the Ready loop's work")
	}
	applyOffsets(t, m, 6, "set a=2;del b;set c=3")
	applyAll(t, m, 7, seedCommands()[3:5])
	got, err := encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encoded after later entries: %d bytes, not the %d of the snapshot at capture", len(got), len(want))
	}
	if h.checkpoints != checkpoints+1 || h.builds != builds+1 {
		t.Fatalf("the encoding made %d checkpoints and %d builds, want 1 and 1", h.checkpoints-checkpoints, h.builds-builds)
	}
	if m.CompactLimit() != math.MaxUint64 || m.GroupStateTooLarge() {
		t.Fatal("a complete captured snapshot must let the log be compacted")
	}

	// Below the level, and with a hook that cannot capture: the snapshot at once.
	for name, hook := range map[string]GroupOffsets{"below the level": h, "no capture": newStateHook(nil)} {
		o := NewMachine(1)
		if err := o.SetGroupOffsets(hook); err != nil {
			t.Fatal(err)
		}
		applyAll(t, o, 1, seedCommands()[:3])
		if name == "no capture" {
			setLevel(t, o, 4, LevelGroupState)
		}
		applyOffsets(t, o, 5, "set x=1")
		want, _ := o.Snapshot()
		encode, err := o.CaptureSnapshot()
		if err != nil {
			t.Fatal(err)
		}
		applyOffsets(t, o, 6, "set x=2")
		if got, err := encode(); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: the capture is not the snapshot at once (%v)", name, err)
		}
	}
}

// A captured state found too large by its encoding leaves the catalog alone in the
// snapshot and keeps the log, as Snapshot does; but a snapshot restored between the
// capture and the end of the encoding decides for itself.
func TestCaptureSnapshotTooLarge(t *testing.T) {
	defer func(l int) { groupStateLimit = l }(groupStateLimit)
	groupStateLimit = 64 << 10
	big := strings.Repeat("x", 16<<10-100)
	large := func() (*Machine, []byte) {
		m := NewMachine(1)
		if err := m.SetGroupOffsets(&capturingHook{stateHook: newStateHook(nil)}); err != nil {
			t.Fatal(err)
		}
		setLevel(t, m, 1, LevelGroupState)
		for i := range 5 {
			applyOffsets(t, m, uint64(2+i), "set "+string(rune('a'+i))+"="+big)
		}
		want, _ := m.Snapshot()
		return m, want
	}
	m, want := large()
	encode, _ := m.CaptureSnapshot()
	got, err := encode()
	if err != nil || !bytes.Equal(got, want) || got[0] == snapVersionGroupState {
		t.Fatalf("too large: version %d (%v), equal to Snapshot's %v", got[0], err, bytes.Equal(got, want))
	}
	if m.CompactLimit() != 0 || !m.GroupStateTooLarge() {
		t.Fatal("a captured state too large must keep the log and say so")
	}

	// A complete snapshot restored while the encoding ran: it is what the log's compaction
	// now depends on.
	small := NewMachine(2)
	if err := small.SetGroupOffsets(newStateHook(nil)); err != nil {
		t.Fatal(err)
	}
	setLevel(t, small, 1, LevelGroupState)
	applyOffsets(t, small, 2, "set a=1")
	complete, _ := small.Snapshot()
	m, _ = large()
	encode, _ = m.CaptureSnapshot()
	if err := m.Restore(complete); err != nil {
		t.Fatal(err)
	}
	if _, err := encode(); err != nil {
		t.Fatal(err)
	}
	if m.CompactLimit() != math.MaxUint64 {
		t.Fatal("an encoding overwrote what a snapshot restored after its capture said")
	}
}
