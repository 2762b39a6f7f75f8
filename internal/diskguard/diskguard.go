// Package diskguard makes a full disk an answer, not an outage. It keeps a
// headroom file of reserved space in the data directory. The first
// write that fails for lack of space puts the broker in the "full" state:
// the headroom file is deleted, so the writes that free space or finish
// work (acks, nacks, deletes, purges, DeleteQueue, DeleteTopic, and the
// journal records they need) have room, while the writes that add data
// (sends, produces, creates) are refused at once with ErrFull,
// without touching the disk. Maintenance tries to write the headroom back;
// once that succeeds there is room again and the broker leaves the state.
// An I/O error (EIO) puts it in the "failed" state, which maintenance leaves
// the same way; writes are not refused in it (the disk answers for itself).
// Each state change is logged once; Health reports the state for /readyz.
//
// The headroom is at most 1/8 of the file system's size (statfs(2) on the real
// disk; MaxHeadroomFraction), lowered with a warning at start when the
// configured size is more. A disk smaller than the configured headroom would
// otherwise never hold it: the broker would start full on an empty disk and
// stay full, since leaving the state needs room for twice the headroom. At
// 1/8, twice the headroom is a quarter of the disk, so an empty disk always
// has it and leaving the state needs only that a quarter be free. Where the
// size cannot be read (another OS, a file system without a size), the
// headroom is as configured.
//
// It owns the headroom file and the disk's state; it must never know what
// is written (queues, topics) or who asked (protocols): the broker calls
// Admit before a write that adds data, Note with every write's error, and
// Recover from its maintenance.
package diskguard

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// Errors of the disk, matched with errors.Is; their messages name no file.
var (
	ErrFull   = errors.New("storage full: the broker's disk has no space left; sends and creates are refused until space is freed (acks and deletes still work)")
	ErrFailed = errors.New("storage failed: the broker's disk answered an I/O error")
)

// Error is a write the disk refused. Its message is ErrFull's
// or ErrFailed's; the cause (with its file path, for the log) is
// reached with errors.Unwrap.
type Error struct {
	Full  bool
	Cause error
}

func (e *Error) Error() string {
	if e.Full {
		return ErrFull.Error()
	}
	return ErrFailed.Error()
}

func (e *Error) Is(target error) bool {
	return (target == ErrFull && e.Full) || (target == ErrFailed && !e.Full)
}

func (e *Error) Unwrap() error { return e.Cause }

// classify tells a disk failure (full, or an I/O error) from other
// errors.
func classify(err error) (full, failed bool) {
	switch {
	case err == nil:
		return false, false
	case vfs.NoSpace(err):
		return true, false
	case errors.Is(err, syscall.EIO), errors.Is(err, syscall.EROFS):
		return false, true
	}
	return false, false
}

// DefaultHeadroom is the headroom's default size.
const DefaultHeadroom = 64 << 20

// MaxHeadroomFraction is the largest share of the file system the headroom
// takes: 1/8, so that the twice-the-headroom Recover needs is a quarter of
// the disk. The default headroom is not lowered on a disk of 512 MiB or more.
const MaxHeadroomFraction = 8

// SizedFS is a file system that tells the size in bytes of the disk holding
// dir (false: unknown). The real file system (vfs.Default) is asked with
// statfs(2) without it; a test's model of a small disk implements it.
type SizedFS interface {
	vfs.FS
	DiskSize(dir string) (int64, bool)
}

const (
	headroomFile = "headroom"
	// spareFile is Recover's probe that there is room beyond the headroom.
	spareFile = "headroom.spare"
)

// Guard holds the headroom and the disk's state. It is safe for concurrent
// use.
type Guard struct {
	fs       vfs.FS
	dir      string
	headroom int64 // 0: no headroom file
	log      *slog.Logger
	now      func() time.Time

	mu    sync.Mutex
	state *Error // nil: writes work
	// full mirrors state.Full for Admit, which every send and produce
	// calls: a load, not a lock every producer would queue on.
	full  atomic.Bool
	since time.Time
}

// New returns the guard of dir, whose headroom file is headroom bytes (0:
// none; lowered to MaxHeadroomFraction of the disk), after writing that file
// if it is missing or short. A disk already too full for it is not
// an error: the guard starts in the full state.
func New(fsys vfs.FS, dir string, headroom int64, log *slog.Logger, now func() time.Time) (*Guard, error) {
	g := &Guard{fs: fsys, dir: dir, headroom: max(headroom, 0), log: log, now: now}
	g.capHeadroom()
	return g, g.open()
}

// capHeadroom lowers the headroom to MaxHeadroomFraction of the disk, once,
// with a warning: an operator who set it (or kept the default) on a small
// disk learns why the file is smaller than asked.
func (g *Guard) capHeadroom() {
	if g.headroom <= 0 {
		return
	}
	var size int64
	var known bool
	if s, ok := g.fs.(SizedFS); ok {
		size, known = s.DiskSize(g.dir)
	} else if g.fs == vfs.Default {
		total, _ := DiskSpace(g.dir)
		size, known = int64(total), total > 0
	}
	limit := size / MaxHeadroomFraction
	if !known || size <= 0 || g.headroom <= limit {
		return
	}
	g.log.Warn("disk headroom lowered: the disk is too small for the configured headroom",
		"from", mib(g.headroom), "to", mib(limit), "disk_size", mib(size))
	g.headroom = limit
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func (g *Guard) open() error {
	if g.headroom <= 0 {
		return nil
	}
	if st, err := g.fs.Stat(g.path()); err == nil && st.Size() >= g.headroom {
		return nil
	}
	err := g.writeHeadroom()
	if full, _ := classify(err); full {
		g.Note(err)
		return nil
	}
	return err
}

func (g *Guard) path() string { return filepath.Join(g.dir, headroomFile) }

// writeHeadroom writes the headroom file whole and durably, or removes
// what it wrote.
func (g *Guard) writeHeadroom() error { return g.reserve(headroomFile, g.headroom) }

// reserve writes the file name of dir, size bytes, whole and durably, or
// removes what it wrote.
func (g *Guard) reserve(name string, size int64) error {
	path := filepath.Join(g.dir, name)
	f, err := g.fs.Create(path)
	if err != nil {
		return err
	}
	// fallocate(2) reserves the blocks without writing them; a file
	// system without it (or the in-memory FS) gets zeros written.
	allocated := false
	if a, ok := f.(vfs.Allocator); ok {
		err = a.Allocate(size)
		allocated = err == nil
		if errors.Is(err, syscall.EOPNOTSUPP) {
			err = nil
		}
	}
	if !allocated && err == nil {
		zeros := make([]byte, min(size, 1<<20))
		for left := size; left > 0 && err == nil; left -= int64(len(zeros)) {
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
		_ = g.fs.Remove(path)
	}
	return err
}

// Note records a write's outcome: a disk failure enters its state (and a
// full disk frees the headroom), and comes back as an *Error; any other
// error comes back as it is.
func (g *Guard) Note(err error) error {
	full, failed := classify(err)
	if !full && !failed {
		return err
	}
	se := &Error{Full: full, Cause: err}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state != nil && (g.state.Full || !full) {
		return se // already in this state (or full, which outranks failed)
	}
	g.state, g.since = se, g.now()
	g.full.Store(full)
	if full {
		released := g.fs.Remove(g.path()) == nil
		g.log.Error("disk full: sends, produces and creates are refused until space is freed; acks and deletes go on",
			"headroom_released", released, "err", err)
	} else {
		g.log.Error("disk failing: a write answered an I/O error", "err", err)
	}
	return se
}

// Admit refuses a write that adds data while the disk is full.
func (g *Guard) Admit() error {
	if !g.full.Load() {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state != nil && g.state.Full {
		return g.state
	}
	return nil
}

// Health is the disk's state: nil when writes work.
func (g *Guard) Health() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == nil {
		return nil
	}
	return fmt.Errorf("%w (since %s)", g.state, g.since.UTC().Format(time.RFC3339))
}

// Recover is maintenance's part: in a failure state, write the headroom
// back (or, without one, a small probe) and leave the state if that works
// with room to spare.
//
// Room to spare means a second file of the headroom's size fits beside it
// (written, then removed). Writing the headroom back alone is not enough:
// the space it takes is the space its release freed, so on a disk that is
// still full it fits at once, the broker leaves the state, the next send
// fills the disk again, and /readyz flaps between ready and full.
func (g *Guard) Recover() {
	g.mu.Lock()
	state, since := g.state, g.since
	g.mu.Unlock()
	if state == nil {
		return
	}
	if g.headroom > 0 {
		if err := g.reserve(headroomFile, g.headroom); err != nil {
			return
		}
	}
	if g.headroom <= 0 || state.Full {
		err := g.reserve(spareFile, max(g.headroom, 4096))
		_ = g.fs.Remove(filepath.Join(g.dir, spareFile))
		if err != nil {
			if g.headroom > 0 && state.Full {
				// Still full: the room the headroom's release freed stays
				// with the acks and deletes that need it.
				_ = g.fs.Remove(g.path())
			}
			return
		}
	}
	g.mu.Lock()
	g.state = nil
	g.full.Store(false)
	g.mu.Unlock()
	g.log.Info("disk writable again: sends, produces and creates are accepted", "was", state.Error(),
		"for", g.now().Sub(since).Round(time.Second).String())
}
