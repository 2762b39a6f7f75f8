package journal

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/storage"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// Loader is how an owner rebuilds its state machine: Reset replaces it
// with an empty one (before each attempt, so a snapshot that fails half way
// leaves nothing behind), Restore is given a snapshot body, and Apply every
// journal record after it, in order.
type Loader struct {
	Reset   func() error
	Restore func(body []byte) error
	Apply   func(offset int64, value []byte) error
}

// Loaded is what Load rebuilt from.
type Loaded struct {
	Replayed int   // journal records replayed
	At       int64 // journal offset of the snapshot restored; 0 with none
	// PassedOver says why snapshots were not used (damaged, refused by
	// Restore, or no longer continued by the journal); nil when none was.
	PassedOver error
	// Degraded: no snapshot was usable and the journal does not go back to
	// the beginning, so the state was rebuilt onto an empty state machine
	// from what the journal still holds. What that loses depends on the
	// owner (a queue delivers again what was acked before the journal's
	// start; see docs/operations.md, "Corruption").
	Degraded bool
}

// Load rebuilds an owner from its newest usable snapshot in dir (the
// current one, else the one before it, see writeSnapshot) and the journal
// log after it. A snapshot that is damaged, that Restore refuses, or that
// the journal no longer continues is passed over, and the reason kept in
// Degraded if no snapshot is usable. Only a failure to read the journal
// itself, or an Apply error, fails Load.
func Load(fsys vfs.FS, dir string, log *storage.Log, l Loader) (Loaded, error) {
	var passed []error
	for _, name := range []string{SnapshotFile, previousSnapshotFile} {
		from, body, found, err := readSnapshot(fsys, filepath.Join(dir, name))
		switch {
		case !found && err == nil:
			continue
		case err != nil:
			passed = append(passed, err)
			continue
		case from < log.LogStartOffset():
			passed = append(passed, fmt.Errorf("snapshot %s at %d: the journal starts after it, at %d", name, from, log.LogStartOffset()))
			continue
		}
		if err := l.Reset(); err != nil {
			return Loaded{}, err
		}
		if err := l.Restore(body); err != nil {
			passed = append(passed, fmt.Errorf("snapshot %s: %w", name, err))
			continue
		}
		n, err := replay(log, from, l.Apply)
		return Loaded{Replayed: n, At: from, PassedOver: errors.Join(passed...)}, err
	}
	// No usable snapshot: everything the journal holds, onto nothing.
	if err := l.Reset(); err != nil {
		return Loaded{}, err
	}
	loaded := Loaded{PassedOver: errors.Join(passed...), Degraded: log.LogStartOffset() > 0}
	var err error
	loaded.Replayed, err = replay(log, log.LogStartOffset(), l.Apply)
	return loaded, err
}

func replay(log *storage.Log, from int64, apply func(int64, []byte) error) (int, error) {
	n := 0
	err := Replay(log, from, func(off int64, v []byte) error {
		n++
		return apply(off, v)
	})
	if err != nil {
		return n, fmt.Errorf("journal replay: %w", err)
	}
	return n, nil
}

// Replay calls fn with each journal record from offset from to the end.
func Replay(log *storage.Log, from int64, fn func(offset int64, value []byte) error) error {
	pos := max(from, log.LogStartOffset())
	for pos < log.HighWatermark() {
		data, err := log.Read(pos, 1<<20)
		if err != nil {
			return err
		}
		next := pos
		for len(data) > 0 {
			n, err := batch.FrameSize(data)
			if err != nil {
				return err
			}
			for r, err := range batch.Records(data[:n]) {
				if err != nil {
					return err
				}
				if r.Offset < pos {
					continue
				}
				if err := fn(r.Offset, r.Value); err != nil {
					return err
				}
				next = r.Offset + 1
			}
			data = data[n:]
		}
		if next == pos {
			// Nothing readable at pos: a damaged range (quarantined by
			// storage) costs its events; replay goes on after it.
			if next = log.SkipDamaged(pos); next == pos {
				return fmt.Errorf("replay: no progress at offset %d", pos)
			}
		}
		pos = next
	}
	return nil
}
