package journal

import (
	"fmt"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/storage"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// Loader is how an owner rebuilds its state machine: Restore is given the
// snapshot body, if there is a snapshot (never called otherwise), and Apply
// every journal record after it, in order.
type Loader struct {
	Restore func(body []byte) error
	Apply   func(offset int64, value []byte) error
}

// Load rebuilds an owner from the snapshot in dir and the journal log after
// it, and returns how many journal records it replayed. The owner resets its
// state machine before calling Load; Load fails if the journal no longer
// holds the records right after the snapshot (they were cut below a newer
// snapshot that has since gone).
func Load(fsys vfs.FS, dir string, log *storage.Log, l Loader) (replayed int, err error) {
	from, body, found, err := LoadSnapshot(fsys, dir)
	if err != nil {
		return 0, err
	}
	if found {
		if err := l.Restore(body); err != nil {
			return 0, fmt.Errorf("snapshot: %w", err)
		}
	}
	if from < log.LogStartOffset() {
		return 0, fmt.Errorf("journal starts at %d, after the snapshot's %d: events are missing", log.LogStartOffset(), from)
	}
	err = Replay(log, from, func(off int64, v []byte) error {
		replayed++
		return l.Apply(off, v)
	})
	if err != nil {
		return replayed, fmt.Errorf("journal replay: %w", err)
	}
	return replayed, nil
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
			return fmt.Errorf("replay: no progress at offset %d", pos)
		}
		pos = next
	}
	return nil
}
