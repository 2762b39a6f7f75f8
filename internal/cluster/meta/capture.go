package meta

import (
	"fmt"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// A metadata snapshot encoded off the Ready loop (multiraft.SnapshotCapturer). At
// LevelGroupState every snapshot carries the consumer groups' whole state (groupstate.go),
// up to MaxGroupStateBytes; built in the Ready loop, with the journal's sync waited for
// first, it held every group of the node: 60 ms for 200,000 committed offsets, a second or
// more near the bound. With a hook that can capture its state (GroupStateCapturer), the
// Ready loop only captures it and the catalog (a State is never modified); the journal's
// sync, the payloads and the encoding are the goroutine's. Anything else (no hook yet, an
// older level, a hook that cannot) is encoded at once, as Snapshot does.

// GroupStateCapturer is an optional interface of a GroupStateSnapshotter.
type GroupStateCapturer interface {
	// CaptureGroupState captures what GroupState would return now, quickly, and returns
	// the function that builds it. Called from the host's Ready loop; build is called
	// once, later, on another goroutine, while the hook goes on applying payloads.
	CaptureGroupState() (build func() (payloads [][]byte, ok bool, err error))
}

var _ multiraft.SnapshotCapturer = (*Machine)(nil)

// CaptureSnapshot is Snapshot's state, captured in the Ready loop for an encoding on
// another goroutine: the catalog, and the group state as of the last entry applied. The
// encoding first waits for the hook's Checkpoint (the journal holds everything applied
// up to the capture, and more), then builds the payloads; one past MaxGroupStateBytes
// leaves the catalog alone in the snapshot, as Snapshot does. What the encoding learns
// of the group state's size (complete, stateTooLarge) is kept unless a snapshot taken or
// restored meanwhile said otherwise.
func (m *Machine) CaptureSnapshot() (func() ([]byte, error), error) {
	m.gmu.Lock()
	c, can := m.hook.(GroupStateCapturer)
	if !can || m.State().FeatureLevel() < LevelGroupState {
		m.gmu.Unlock()
		data, err := m.Snapshot()
		if err != nil {
			return nil, err
		}
		return func() ([]byte, error) { return data, nil }, nil
	}
	m.snapGen++
	gen, hook, index, state := m.snapGen, m.hook, m.lastApplied, m.State()
	build := c.CaptureGroupState()
	m.gmu.Unlock()
	return func() ([]byte, error) {
		if err := hook.Checkpoint(); err != nil {
			return nil, fmt.Errorf("meta: group offsets checkpoint: %w", err)
		}
		payloads, ok, err := build()
		fits, err := groupStateFits(payloads, ok, err)
		if err != nil {
			return nil, err
		}
		m.gmu.Lock()
		if m.snapGen == gen {
			m.complete, m.stateTooLarge = fits, !fits
		}
		m.gmu.Unlock()
		b := state.encode()
		if !fits {
			return b, nil
		}
		b[0] = snapVersionGroupState
		return appendGroupState(b, groupState{index: index, payloads: payloads}), nil
	}, nil
}
