package broker

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"

	"github.com/sluice-mq/sluice/internal/diskguard"
	"github.com/sluice-mq/sluice/internal/journal"
	"github.com/sluice-mq/sluice/internal/storage"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// machine is the runtime every journaled state machine of the broker shares:
// a queue's cursor (queueRT), a subscription's cursors (subRT) and the
// consumer-group coordinator (groupRT) each embed one. It owns the lock that
// serialises the state machine, its journal, the wake-ups of waiters, and
// the one recovery policy:
//
// When a journal write fails, memory is ahead of disk. The operation that
// saw the failure answers with it and marks the machine broken; the next
// operation (checkLocked, via lockChecked) first rebuilds the state machine
// from its snapshot and journal, and fails with "unavailable" if even that
// fails. So what an answer said is never contradicted by a later one: an
// event that did not reach the disk is forgotten before anyone else looks.
type machine struct {
	what   string // "queue emails", "subscription orders/audit", "groups": for errors
	fs     vfs.FS
	logger *slog.Logger // carries the owner's name
	dir    string       // holds journal/ and snapshot
	hooks  machineHooks
	jr     *journal.Journal
	disk   *diskguard.Guard // hears of every failed journal write

	// mu guards the owner's state machine, and broken and wake. It is held
	// for in-memory work and to submit journal events in the order they
	// were applied; never across an fdatasync.
	mu     sync.Mutex
	broken error         // memory may be ahead of the journal: the next operation reloads
	wake   chan struct{} // closed and replaced when work may have become available
}

// machineHooks are what an owner tells its machine about its state machine.
type machineHooks struct {
	// fresh replaces the state machine with an empty one, before a load,
	// and returns how to put the old one back if the load fails.
	fresh func() (rollback func(), err error)
	// loader restores a snapshot and applies journal records (package
	// journal); it runs with mu held, or before the machine is shared.
	loader journal.Loader
	// snapshot captures the state machine for a snapshot; called with mu held, its
	// encoding runs later aside (journal.Capture).
	snapshot journal.Capture
	// fault, if set, reports a bug the state machine caught in itself: the
	// machine then reloads rather than trust it.
	fault func() error
	// reloaded, if set, runs after a reload with mu held (the group
	// coordinator fails the joins that can no longer complete).
	reloaded func()
}

// openMachine opens m's journal in dir, loads the state machine from disk
// and starts the journal's writer.
func (b *Broker) openMachine(m *machine, what, dir string, log *slog.Logger, hooks machineHooks) error {
	m.what, m.fs, m.dir, m.logger, m.hooks, m.disk = what, b.opts.FS, dir, log, hooks, b.disk
	m.wake = make(chan struct{})
	jlog, syncEach, err := journal.OpenLog(b.logOptions(filepath.Join(dir, "journal"), journalSegmentBytes))
	if err != nil {
		return err
	}
	loaded, err := m.load(jlog)
	if err != nil {
		jlog.Close()
		return err
	}
	m.jr = journal.Start(jlog, loaded, journal.Options{SyncEach: syncEach, Now: b.opts.Now,
		Snapshots: journal.SnapshotPolicy{FS: b.opts.FS, Dir: dir, Every: b.opts.SnapshotEvery, Warn: log.Warn}})
	return nil
}

// journalSegmentBytes keeps journals in small segments, so a snapshot lets
// the journal below it be deleted soon.
const journalSegmentBytes = 64 << 20

// load rebuilds the state machine from its snapshots and jlog. If that
// fails, the state machine is the one it had before. A damaged snapshot is
// logged, once per load, at error level; journal.Load has passed over it.
func (m *machine) load(jlog *storage.Log) (journal.Loaded, error) {
	var rollback func()
	l := m.hooks.loader
	l.Reset = func() error {
		rb, err := m.hooks.fresh()
		if rollback == nil {
			rollback = rb
		}
		return err
	}
	loaded, err := journal.Load(m.fs, m.dir, jlog, l)
	if err != nil {
		if rollback != nil {
			rollback()
		}
		return journal.Loaded{}, err
	}
	switch {
	case loaded.Degraded:
		m.logger.Error("state rebuilt from its journal alone: no usable snapshot; what the journal's cut parts held is lost (a queue delivers those messages again)",
			"journal_start", jlog.LogStartOffset(), "err", loaded.PassedOver)
	case loaded.PassedOver != nil:
		m.logger.Error("damaged snapshot passed over; the previous one and the journal after it were used, nothing lost",
			"err", loaded.PassedOver)
	}
	return loaded, nil
}

// lockChecked takes mu, after a journal failure reloading the state machine
// first; on error mu is not held.
func (m *machine) lockChecked() error {
	m.mu.Lock()
	if err := m.checkLocked(); err != nil {
		m.mu.Unlock()
		return err
	}
	return nil
}

// checkLocked rebuilds the state machine from disk if a journal write
// failed since it was last loaded, and refuses work if that fails too
// (the state machine then stays as it was, and the next operation tries
// again). Called with mu held.
func (m *machine) checkLocked() error {
	if m.broken == nil {
		return nil
	}
	if err := m.reloadLocked(); err != nil {
		return fmt.Errorf("%s is unavailable after a storage failure: %w", m.what, err)
	}
	return nil
}

// reloadLocked replaces the state machine with what its journal holds. Called with mu
// held: after a write failure (checkLocked), and by a cluster node's coordinator taking
// over the consumer groups (clusterGroups.reset).
func (m *machine) reloadLocked() error {
	jlog := m.jr.Log()
	if err := jlog.Sync(); err != nil {
		return err
	}
	loaded, err := m.load(jlog)
	if err != nil {
		return err
	}
	m.jr.Reset(loaded)
	// The reload repairs a write failure whoever asked for it (a cluster's takeover may
	// come first): say so then, and only then.
	if m.broken != nil {
		m.logger.Warn("state reloaded from its journal after a write failure", "err", m.broken)
	}
	m.broken = nil
	if m.hooks.reloaded != nil {
		m.hooks.reloaded()
	}
	// Waiters re-read what they wait on: the reload may have brought
	// deliveries back.
	m.notifyLocked()
	return nil
}

// markBrokenLocked records that memory may be ahead of disk. Called with mu
// held.
func (m *machine) markBrokenLocked(err error) {
	if m.broken == nil {
		m.broken = err
	}
}

// markBroken is markBrokenLocked for callers without mu; it returns err.
func (m *machine) markBroken(err error) error {
	m.mu.Lock()
	m.markBrokenLocked(err)
	m.mu.Unlock()
	return err
}

// recordLocked journals encoded events (in the order applied) and returns
// a channel that reports their durability, nil when there are none. Called
// with mu held.
func (m *machine) recordLocked(enc [][]byte) <-chan error {
	if m.hooks.fault != nil {
		if err := m.hooks.fault(); err != nil && m.broken == nil {
			m.broken = err
			m.logger.Error("state machine fault; it will be rebuilt from its journal", "err", err)
		}
	}
	if len(enc) == 0 {
		return nil
	}
	if m.broken != nil {
		// Memory may hold what the disk does not (a dead-letter copy
		// that failed): no snapshot may be taken of it until a reload.
		return m.jr.Submit(enc)
	}
	return m.jr.Record(enc, m.hooks.snapshot)
}

// failed is a durability channel that has already failed.
func failed(err error) <-chan error {
	ch := make(chan error, 1)
	ch <- err
	return ch
}

// wait waits for a journal write; a failure marks the machine broken, since
// memory is now ahead of disk.
func (m *machine) wait(ch <-chan error) error {
	if ch == nil {
		return nil
	}
	err := <-ch
	if err != nil {
		m.markBroken(err)
		err = m.disk.Note(err)
	}
	return err
}

// notify wakes every waiter.
func (m *machine) notify() {
	m.mu.Lock()
	m.notifyLocked()
	m.mu.Unlock()
}

// notifyLocked wakes every waiter. Called with mu held.
func (m *machine) notifyLocked() {
	close(m.wake)
	m.wake = make(chan struct{})
}

// maintainLocked folds an idle machine's last events into a snapshot,
// unless memory may be ahead of disk (broken). Called with mu held.
func (m *machine) maintainLocked() {
	if m.broken == nil {
		m.jr.MaybeSnapshot(m.jr.SnapshotEvery()/10, 0, m.hooks.snapshot)
	}
}

// close folds what piled up since the last snapshot (as maintenance
// would), so the next start replays little, then closes the journal.
func (m *machine) close() error {
	if m.jr == nil {
		return nil
	}
	m.mu.Lock()
	m.maintainLocked()
	m.mu.Unlock()
	return m.jr.Close()
}
