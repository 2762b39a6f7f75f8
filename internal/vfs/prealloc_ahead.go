package vfs

import (
	"fmt"
	"syscall"
)

// Zero-filling ahead of the writer.
//
// A preallocating file used to write its next chunk of zeros inside the
// Write that ran out of them: on a log under SyncAlways that is the
// syncer, so one group commit in every chunk paid a chunk of pwrite(2)
// (8-25 % of a produce benchmark's CPU) before its fdatasync. Now, once
// less than a chunk of zeros is left, Write starts a goroutine that writes
// the next chunk off the writer's path, and the writer normally finds the
// zeros already in the page cache. The fill does not sync: the writer's
// next fdatasync flushes the zeros and commits the size change, as before
// (see zeroAhead for why).
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

// fillAhead writes zeros over [from, to) and publishes them
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

// zeroAhead writes the zeros in pieces, checking for a stop between them.
// It does not sync them: the writer's next Sync flushes them (an fdatasync
// of its own here was one more device flush per chunk, and measured
// slower on a contended disk), and a sync on the writer's descriptor could
// consume a writeback error the writer's Sync must report (fsyncgate).
func (f *osFile) zeroAhead(pr *prealloc, from, to int64) error {
	fd := int(f.f.Fd())
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
	return nil
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
