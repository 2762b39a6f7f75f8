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
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// fullError is a write of a group's (or, group 0, the Sync's) the disk had no room for:
// op says which ("append", "apply snapshot", "sync", "apply").
type fullError struct {
	group GroupID
	op    string
	err   error
}

func (e *fullError) Error() string {
	if e.group == 0 {
		return fmt.Sprintf("multiraft: %s: no space left on the disk: %v", e.op, e.err)
	}
	return fmt.Sprintf("multiraft: group %d: %s: no space left on the disk: %v", e.group, e.op, e.err)
}

func (e *fullError) Unwrap() error { return e.err }

// asFull is err as a *fullError when it is an append the disk had no room for and the
// group's storage is still writable (a storage that failed, as raftstore's Err reports,
// stays failed: retrying it would wait forever), nil otherwise.
func asFull(g GroupID, op string, st *cachedStorage, err error) *fullError {
	if !vfs.NoSpace(err) {
		return nil
	}
	if storageFailed(st.Storage) {
		return nil
	}
	return &fullError{group: g, op: op, err: err}
}

// storageFailed reports whether st says it refuses every write until reopened
// (raftstore's Err); a storage without that method never does.
func storageFailed(st Storage) bool {
	f, ok := st.(interface{ Err() error })
	return ok && f.Err() != nil
}

// syncFull is err as a *fullError when it is a Sync that found no room (the HardState
// log's append: raftstore keeps every HardState staged for the next Sync) and failed none
// of the written storages; nil otherwise (an fdatasync error is final).
func syncFull(written []Storage, err error) *fullError {
	if !vfs.NoSpace(err) {
		return nil
	}
	for _, st := range written {
		if storageFailed(st) {
			return nil
		}
	}
	return &fullError{op: "sync", err: err}
}

// NoRoomError is what a StateMachine's Apply returns when the disk had no room for the
// entry at Index: the entries before it are applied, it and those after are not (the
// state machine undid whatever part of it it wrote, as storage cuts back a failed
// append). The host applies them again, from Index, once there is room; any other Apply
// error stops the group on this node.
type NoRoomError struct {
	Index uint64
	Err   error
}

func (e *NoRoomError) Error() string {
	return fmt.Sprintf("multiraft: no room on the disk to apply entry %d: %v", e.Index, e.Err)
}

func (e *NoRoomError) Unwrap() error { return e.Err }

// stall is a round whose writes found the disk full, kept to be finished: written again
// (persisted false), or, once written, synced and answered, applied from where its apply
// stopped (each readyWork's done).
type stall struct {
	work      []readyWork
	persisted bool
	err       *fullError
	since     time.Time
	tries     int
	next      time.Duration // until Run retries
}

const (
	stallFirstRetry = 50 * time.Millisecond
	stallMaxRetry   = time.Second
)

// stalledWork is the stalled round's work, nil when none, and whether it was written.
// Called under readyMu.
func (h *Host) stalledWork() ([]readyWork, bool) {
	if h.stalled == nil {
		return nil, false
	}
	h.stalled.tries++
	return h.stalled.work, h.stalled.persisted
}

// endStall ends a stall: its round is done. Called under readyMu.
func (h *Host) endStall() {
	st := h.stalled
	if st == nil {
		return
	}
	h.stalled = nil
	h.setDiskFull(nil)
	h.cfg.Log.Info("multiraft: the disk has room again: this node's Raft groups go on",
		"stalled_for", time.Since(st.since).Round(time.Millisecond).String(), "retries", st.tries)
}

// stallOnFull keeps work as the stalled round when err is a full disk (persisted: met in
// its apply, after its sync) and reports true. Called under readyMu.
func (h *Host) stallOnFull(work []readyWork, persisted bool, err error) bool {
	var full *fullError
	if !errors.As(err, &full) {
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
	h.stalled.err, h.stalled.persisted = full, persisted
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

// DiskFull is the write that found no room and waits for it, nil while none does: a round
// that stalls the Ready loop, or a preparation of a leader's snapshot (its pull of records)
// that failed within prepFullFor.
func (h *Host) DiskFull() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.diskFull != nil {
		return h.diskFull
	}
	return h.prepFullLocked()
}

// prepFullFor is how long a snapshot preparation's no-room failure counts as the node's
// state. A leader resends the snapshot every few ticks while the follower needs it, so an
// ongoing shortage keeps it fresh; one that ended without a later preparation (a new leader
// sent entries instead, the group moved away) must not leave /readyz at 503 for good.
const prepFullFor = 5 * time.Second

// prepFullLocked is the last preparation's no-room error if it is recent. Called with
// h.mu held.
func (h *Host) prepFullLocked() error {
	if h.prepFull == nil || time.Since(h.prepFullAt) >= prepFullFor {
		return nil
	}
	return h.prepFull
}

// prepNoSpaceLocked notes a snapshot preparation that found no room: the first of a run
// is logged and heard by OnDiskFull (the broker frees its headroom), and preparations wait
// a second between tries (maybePrepare). Called with h.mu held.
func (h *Host) prepNoSpaceLocked(g *group, err error) {
	first := h.prepFullLocked() == nil // a new run: logged and heard again
	h.prepFull, h.prepFullAt = err, time.Now()
	if !first {
		return
	}
	h.stats.DiskFullStalls++
	h.cfg.Log.Error("multiraft: the disk is full: a snapshot from the leader cannot be prepared until there is room; "+
		"the group waits, its other replicas carry on", "group", uint64(g.id), "err", err)
	if f := h.onDiskFull.Load(); f != nil {
		go (*f)(&fullError{group: g.id, op: "prepare snapshot", err: err}) // not under h.mu
	}
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
