package meta

import (
	"errors"
	"reflect"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// FuzzDecode: no input panics the decoder, and what it accepts encodes back to a command
// that decodes to the same thing.
func FuzzDecode(f *testing.F) {
	for _, c := range seedCommands() {
		c.Origin, c.Request = 1, 7
		f.Add(c.Encode(nil))
	}
	f.Add([]byte{})
	f.Add([]byte{commandVersion, byte(OpCreateTopic), 0, 0})
	f.Add((&Command{Op: OpGroupOffsets, Origin: 1, Request: 7, Payload: []byte("offsets")}).Encode(nil))
	for _, c := range append(append(groupConfigCommands(), pinCommands()...), levelCommands()...) {
		c.Origin, c.Request = 1, 7
		f.Add(c.Encode(nil))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Decode(b)
		if err != nil {
			return
		}
		again, err := Decode(c.Encode(nil))
		if err != nil {
			t.Fatalf("re-encoding of an accepted command refused: %v", err)
		}
		if !reflect.DeepEqual(again, c) {
			t.Fatalf("round trip changed the command:\n%+v\n%+v", c, again)
		}
		// Whatever decodes, applies without an apply error (refusals are results), but
		// for a feature level this binary does not read, which stops the group.
		m := NewMachine(1)
		applyAll(t, m, 1, seedCommands()[:4])
		if c.Op == OpSetFeatureLevel && c.Level > MaxFeatureLevel {
			if err := m.Apply([]multiraft.Entry{{Index: 5, Term: 2, Data: b}}); !errors.Is(err, ErrFeatureLevel) {
				t.Fatalf("level %d applied: %v", c.Level, err)
			}
			return
		}
		applyAll(t, m, 5, []Command{c})
	})
}

// FuzzRestore: no snapshot bytes panic Restore; what it accepts snapshots back to the same
// bytes.
func FuzzRestore(f *testing.F) {
	m := NewMachine(1)
	applyAll(f, m, 1, seedCommands())
	snap, _ := m.Snapshot()
	f.Add(snap)
	f.Add([]byte{snapVersion})
	pending := NewMachine(1)
	applyAll(f, pending, 1, append(seedCommands(), Command{Op: OpGroupOffsets, Payload: []byte("offsets")}))
	snap, _ = pending.Snapshot()
	f.Add(snap)
	configs := NewMachine(1)
	applyAll(f, configs, 1, append(seedCommands(), groupConfigCommands()...))
	snap, _ = configs.Snapshot()
	f.Add(snap)
	pins := NewMachine(1)
	applyAll(f, pins, 1, append(seedCommands(), pinCommands()...))
	snap, _ = pins.Snapshot()
	f.Add(snap)
	levels := NewMachine(1)
	applyAll(f, levels, 1, append(seedCommands(), levelCommands()...))
	snap, _ = levels.Snapshot()
	f.Add(snap)
	complete := NewMachine(1) // a complete group state (version 15), its hook's payloads waiting
	applyAll(f, complete, 1, append(seedCommands(), Command{Op: OpSetFeatureLevel, Level: LevelGroupState}))
	base := complete.State().encode()
	base[0] = snapVersionGroupState
	f.Add(appendGroupState(base, groupState{index: 99, payloads: [][]byte{[]byte("set a=1"), []byte("set b=2")}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		m := NewMachine(1)
		if err := m.Restore(b); err != nil {
			return
		}
		again, _ := m.Snapshot()
		r := NewMachine(1)
		if err := r.Restore(again); err != nil || !reflect.DeepEqual(r.State(), m.State()) {
			t.Fatalf("a restored state does not round-trip: %v", err)
		}
	})
}
