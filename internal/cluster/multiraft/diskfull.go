package multiraft

// A full disk stalls this node's Ready loop; it does not stop the host.
//
// Every other storage failure of a round is final (ready.go): the groups took Readys they
// cannot advance, and the node must restart from what its storage holds. A write that
// found no room (ENOSPC, or EDQUOT for a quota) is different: an append the storage cut
// back, or a Sync whose HardState log left the HardStates staged (the Storage and Engine
// contracts); nothing of the round was acknowledged (answers to appends and votes wait
// for the sync), so the same round can be written again once there is room.
// Until then the host takes no new Ready: its groups send nothing, their peers elect
// other leaders and carry on without this replica (a stalled leader is a silent one), and
// Run retries the round, 50 ms after the first failure and then at most every second.
// Config.OnDiskFull hears the first failure of each stall, so that the node can free its
// reserved space (the broker's diskguard headroom: the retry then fits at once) and
// refuse new data where it leads; DiskFull reports the stall, for /readyz.

import (
	"errors"
	"fmt"
	"syscall"
	"time"
)

// fullError is an append of a group (or, group 0, a Sync) the disk had no room for.
type fullError struct {
	group GroupID
	err   error
}

func (e *fullError) Error() string {
	if e.group == 0 {
		return fmt.Sprintf("multiraft: sync: no space left on the disk: %v", e.err)
	}
	return fmt.Sprintf("multiraft: group %d: append: no space left on the disk: %v", e.group, e.err)
}

func (e *fullError) Unwrap() error { return e.err }

// asFull is err as a *fullError when it is an append the disk had no room for and the
// group's storage is still writable (a storage that failed, as raftstore's Err reports,
// stays failed: retrying it would wait forever), nil otherwise.
func asFull(g GroupID, st *cachedStorage, err error) *fullError {
	if !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EDQUOT) {
		return nil
	}
	if f, ok := st.Storage.(interface{ Err() error }); ok && f.Err() != nil {
		return nil
	}
	return &fullError{group: g, err: err}
}

// syncFull is err as a *fullError when it is a Sync that found no room (the HardState
// log's append: raftstore keeps every HardState staged for the next Sync) and failed none
// of the written storages; nil otherwise (an fdatasync error is final).
func syncFull(written []Storage, err error) *fullError {
	if !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EDQUOT) {
		return nil
	}
	for _, st := range written {
		if f, ok := st.(interface{ Err() error }); ok && f.Err() != nil {
			return nil
		}
	}
	return &fullError{err: err}
}

// stall is a round whose writes found the disk full, kept to be written again.
type stall struct {
	work  []readyWork
	err   *fullError
	since time.Time
	tries int
	next  time.Duration // until Run retries
}

const (
	stallFirstRetry = 50 * time.Millisecond
	stallMaxRetry   = time.Second
)

// stalledWork is the stalled round's work, nil when none. Called under readyMu.
func (h *Host) stalledWork() []readyWork {
	if h.stalled == nil {
		return nil
	}
	h.stalled.tries++
	return h.stalled.work
}

// stallOnFull keeps work as the stalled round when err is a full disk and reports true; a
// round written whole ends a stall. Called under readyMu.
func (h *Host) stallOnFull(work []readyWork, err error) bool {
	var full *fullError
	if !errors.As(err, &full) {
		if st := h.stalled; st != nil {
			h.stalled = nil
			h.setDiskFull(nil)
			if err == nil {
				h.cfg.Log.Info("multiraft: the disk has room again: this node's Raft groups go on",
					"stalled_for", time.Since(st.since).Round(time.Millisecond).String(), "retries", st.tries)
			}
		}
		return false
	}
	if h.stalled == nil {
		h.stalled = &stall{work: work, since: time.Now(), next: stallFirstRetry}
		h.cfg.Log.Error("multiraft: the disk is full: this node's Raft groups wait until there is room "+
			"(their other replicas carry on without it), retrying the write", "err", full)
		h.mu.Lock()
		h.stats.DiskFullStalls++
		h.mu.Unlock()
		if f := h.onDiskFull.Load(); f != nil {
			(*f)(full)
		}
	} else {
		h.stalled.next = min(2*h.stalled.next, stallMaxRetry)
	}
	h.stalled.err = full
	h.setDiskFull(full)
	return true
}

// SetOnDiskFull replaces Config.OnDiskFull: for what exists only after the host (a broker
// started on it).
func (h *Host) SetOnDiskFull(f func(error)) {
	if f == nil {
		h.onDiskFull.Store(nil)
		return
	}
	h.onDiskFull.Store(&f)
}

// Err is the storage error that stopped the host (its Ready loop takes no more rounds: the
// node must restart from what its storage holds), nil while it runs. A full disk does not
// stop it (DiskFull).
func (h *Host) Err() error { return h.storageError() }

func (h *Host) setDiskFull(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.diskFull = err
}

// DiskFull is the append that stalls this node's Ready loop for lack of space, nil while
// none does.
func (h *Host) DiskFull() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.diskFull
}

// stallRetry is how long Run waits before retrying a stalled round; 0 when none is.
// Called from Run, the one caller of ProcessReady outside tests.
func (h *Host) stallRetry() time.Duration {
	h.readyMu.Lock()
	defer h.readyMu.Unlock()
	if h.stalled == nil {
		return 0
	}
	return h.stalled.next
}
