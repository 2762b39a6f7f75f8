package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// A full disk is an answer, not an outage. The broker keeps a headroom
// file of zeros in its data directory (Options.HeadroomBytes). The first
// write that fails for lack of space puts the broker in the "full" state:
// the headroom file is deleted, so the writes that free space or finish
// work (acks, nacks, deletes, purges, DeleteQueue, DeleteTopic, and the
// journal records they need) have room, while the writes that add data
// (sends, produces, creates) are refused at once with ErrStorageFull,
// without touching the disk. Maintenance tries to write the headroom back;
// once that succeeds there is room again and the broker leaves the state.
// An I/O error (EIO) puts it in the "failed" state, which maintenance leaves
// the same way; writes are not refused in it (the disk answers for itself).
// Each state change is logged once; Health reports the state for /readyz.

// Errors of the disk, matched with errors.Is; their messages name no file.
var (
	ErrStorageFull   = errors.New("storage full: the broker's disk has no space left; sends and creates are refused until space is freed (acks and deletes still work)")
	ErrStorageFailed = errors.New("storage failed: the broker's disk answered an I/O error")
)

// StorageError is a write the disk refused. Its message is ErrStorageFull's
// or ErrStorageFailed's; the cause (with its file path, for the log) is
// reached with errors.Unwrap.
type StorageError struct {
	Full  bool
	Cause error
}

func (e *StorageError) Error() string {
	if e.Full {
		return ErrStorageFull.Error()
	}
	return ErrStorageFailed.Error()
}

func (e *StorageError) Is(target error) bool {
	return (target == ErrStorageFull && e.Full) || (target == ErrStorageFailed && !e.Full)
}

func (e *StorageError) Unwrap() error { return e.Cause }

// classifyStorage tells a disk failure (full, or an I/O error) from other
// errors.
func classifyStorage(err error) (full, failed bool) {
	switch {
	case err == nil:
		return false, false
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return true, false
	case errors.Is(err, syscall.EIO), errors.Is(err, syscall.EROFS):
		return false, true
	}
	return false, false
}

// DefaultHeadroomBytes is Options.HeadroomBytes's default.
const DefaultHeadroomBytes = 64 << 20

const headroomFile = "headroom"

// diskGuard holds the headroom and the disk's state.
type diskGuard struct {
	fs       vfs.FS
	dir      string
	headroom int64 // 0: no headroom file
	log      *slog.Logger
	now      func() time.Time

	mu    sync.Mutex
	state *StorageError // nil: writes work
	since time.Time
}

// open writes the headroom file if it is missing or short. A disk already
// too full for it is not an error: the broker starts in the full state.
func (g *diskGuard) open() error {
	if g.headroom <= 0 {
		return nil
	}
	if st, err := g.fs.Stat(g.path()); err == nil && st.Size() >= g.headroom {
		return nil
	}
	err := g.writeHeadroom()
	if full, _ := classifyStorage(err); full {
		g.note(err)
		return nil
	}
	return err
}

func (g *diskGuard) path() string { return filepath.Join(g.dir, headroomFile) }

// writeHeadroom writes the headroom file whole and durably, or removes
// what it wrote.
func (g *diskGuard) writeHeadroom() error {
	f, err := g.fs.Create(g.path())
	if err != nil {
		return err
	}
	// fallocate(2) reserves the blocks without writing them; a file
	// system without it (or the in-memory FS) gets zeros written.
	allocated := false
	if a, ok := f.(vfs.Allocator); ok {
		err = a.Allocate(g.headroom)
		allocated = err == nil
		if errors.Is(err, syscall.EOPNOTSUPP) {
			err = nil
		}
	}
	if !allocated && err == nil {
		zeros := make([]byte, min(g.headroom, 1<<20))
		for left := g.headroom; left > 0 && err == nil; left -= int64(len(zeros)) {
			_, err = f.Write(zeros[:min(left, int64(len(zeros)))])
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = g.fs.SyncDir(g.dir)
	}
	if err != nil {
		_ = g.fs.Remove(g.path())
	}
	return err
}

// note records a write's outcome: a disk failure enters its state (and a
// full disk frees the headroom), and comes back as a *StorageError; any
// other error comes back as it is.
func (g *diskGuard) note(err error) error {
	full, failed := classifyStorage(err)
	if !full && !failed {
		return err
	}
	se := &StorageError{Full: full, Cause: err}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state != nil && (g.state.Full || !full) {
		return se // already in this state (or full, which outranks failed)
	}
	g.state, g.since = se, g.now()
	if full {
		released := g.fs.Remove(g.path()) == nil
		g.log.Error("disk full: sends, produces and creates are refused until space is freed; acks and deletes go on",
			"headroom_released", released, "err", err)
	} else {
		g.log.Error("disk failing: a write answered an I/O error", "err", err)
	}
	return se
}

// admit refuses a write that adds data while the disk is full.
func (g *diskGuard) admit() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state != nil && g.state.Full {
		return g.state
	}
	return nil
}

// health is the disk's state: nil when writes work.
func (g *diskGuard) health() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == nil {
		return nil
	}
	return fmt.Errorf("%w (since %s)", g.state, g.since.UTC().Format(time.RFC3339))
}

// recover is maintenance's part: in a failure state, write the headroom
// back (or, without one, a small probe) and leave the state if that works.
func (g *diskGuard) recover() {
	g.mu.Lock()
	state, since := g.state, g.since
	g.mu.Unlock()
	if state == nil {
		return
	}
	size := g.headroom
	if size <= 0 {
		size = 4096
	}
	probe := diskGuard{fs: g.fs, dir: g.dir, headroom: size}
	if err := probe.writeHeadroom(); err != nil {
		return
	}
	if g.headroom <= 0 {
		_ = g.fs.Remove(g.path())
	}
	g.mu.Lock()
	g.state = nil
	g.mu.Unlock()
	g.log.Info("disk writable again: sends, produces and creates are accepted", "was", state.Error(),
		"for", g.now().Sub(since).Round(time.Second).String())
}
