package vfs

import (
	"fmt"
	"os"
	"syscall"
)

// Zero-filling ahead of the writer.
//
// A preallocating file used to write its next chunk of zeros inside the
// Write that ran out of them: on a log under SyncAlways that is the
// syncer, so one group commit in every chunk paid a chunk of pwrite(2)
// (25 % of a produce benchmark's CPU) and its fdatasync then flushed the
// chunk too and committed the size change to the file system's journal:
// the tail of the commit latency. Now, once less than a chunk of zeros is
// left, Write starts a goroutine that writes the next chunk and
// fdatasyncs it, off the writer's path, and the writer normally finds its
// blocks already allocated, zeroed and on disk.
//
// The fill's fdatasync goes through a descriptor of its own (reopened
// through /proc/self/fd): the kernel reports a writeback error once per
// open file description (errseq), so a sync on the writer's descriptor
// could consume an error that the writer's own Sync must see (fsyncgate).
// On a separate open file the writer's next Sync still reports it. Without
// /proc, the fill writes through the writer's descriptor and does not
// sync: the writer's next Sync flushes the zeros, as before.
//
// Crash safety is what it was: the zeros lie past the logical end, where
// recovery already reads a batch header of zeros as a torn tail and cuts
// it. Data never lands where a fill still writes: a Write that would pass
// the zeros written so far waits for the running fill first.

// aheadPiece bounds one pwrite of a fill, so a data write waiting for the
// inode lock waits behind at most this much copying.
const aheadPiece = 64 << 10

// startAheadLocked starts the background fill of the chunk after the
// allocated space. Called with mu held and no fill running.
func (f *osFile) startAheadLocked() {
	pr := f.pre
	from, to := pr.allocated, pr.allocated+pr.chunk
	done := make(chan struct{})
	pr.ahead = done
	go f.fillAhead(pr, from, to, done)
}

// fillAhead writes zeros over [from, to), syncs them, and publishes them
// as allocated; on failure or a stop it cuts the file back to from.
func (f *osFile) fillAhead(pr *prealloc, from, to int64, done chan struct{}) {
	err := f.zeroAhead(pr, from, to)
	pr.mu.Lock()
	defer pr.mu.Unlock()
	defer close(done)
	pr.ahead = nil
	if err == nil {
		pr.allocated = to
		return
	}
	if err != errStopped {
		pr.noAhead = true // do not retry in the background (ENOSPC): Write falls back
	}
	// No data lies at or past from (Write waits for us before it passes
	// allocated), so cutting back loses nothing.
	if f.f.Truncate(from) != nil {
		pr.allocated = to // zeros we may not have cut: Close trims them
	}
}

var errStopped = fmt.Errorf("vfs: zero fill stopped")

// zeroAhead writes the zeros in pieces, checking for a stop between them,
// then syncs them through its own descriptor.
func (f *osFile) zeroAhead(pr *prealloc, from, to int64) error {
	w, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", f.f.Fd()), os.O_WRONLY, 0)
	if err != nil {
		w = nil // no /proc: write through the writer's descriptor, never sync on it
	} else {
		defer w.Close()
	}
	fd := int(f.f.Fd())
	if w != nil {
		fd = int(w.Fd())
	}
	for off := from; off < to; {
		if pr.stop.Load() {
			return errStopped
		}
		k := min(int64(aheadPiece), to-off)
		n, err := syscall.Pwrite(fd, zeros[:k], off)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("vfs: zero fill: short write")
		}
		off += int64(n)
	}
	if w == nil || pr.stop.Load() {
		return nil
	}
	for {
		err := syscall.Fdatasync(fd)
		if err != syscall.EINTR {
			// A failed sync of zeros is no data lost: the zeros are still
			// written, and the writer's own Sync reports any error of its
			// data on its own descriptor.
			return nil
		}
	}
}

// waitAheadLocked waits for a running background fill to end. Called with
// mu held; releases it while waiting.
func (f *osFile) waitAheadLocked() {
	pr := f.pre
	for pr.ahead != nil {
		done := pr.ahead
		pr.mu.Unlock()
		<-done
		pr.mu.Lock()
	}
}

// stopAheadLocked ends a running background fill early and waits for it
// (Truncate, Close: the file's size must be the caller's to set). Called
// with mu held.
func (f *osFile) stopAheadLocked() {
	pr := f.pre
	if pr.ahead == nil {
		return
	}
	pr.stop.Store(true)
	f.waitAheadLocked()
	pr.stop.Store(false)
}
