// Package journal makes a pure state machine durable: its events are
// appended to a storage log with group commit, it is snapshotted now and
// then, and at start it is rebuilt from the latest snapshot plus the
// journal after it.
//
// It owns the journal's write path (one writer goroutine per journal, the
// ordering and durability promise to submitters), the snapshot file and its
// framing (a snapshot captured under the owner's lock, encoded on a goroutine
// of its own: Capture), and replay. It must never know what the events mean (a queue
// cursor's, a subscription's, the group coordinator's: the owner encodes
// them) and never decide what an owner does after a failure: it reports the
// failure, refuses later submissions until Reset, and the owner rebuilds.
//
// On disk, in the owner's directory:
//
//	journal/    a storage log; one record per event, the owner's encoding
//	snapshot    | journal offset uint64 | CRC-32C of body uint32 | body … |
//
// A snapshot at offset N holds the owner's state after every event below N.
// It is written only once the journal is durable up to N, and the journal is
// then cut below N (whole segments), so replay work at start stays bounded.
package journal

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/linger"
	"github.com/sluice-mq/sluice/internal/storage"
)

// Journal appends state-machine events to a log in the order they were
// submitted, and tells each submitter when its events are durable.
//
// Submitters call Submit (or Record) while holding their state machine's
// lock, so the journal's order is the order in which the events were applied
// in memory; they wait for durability after releasing that lock. One
// goroutine writes: everything submitted while it waits for the previous
// fdatasync goes into the next append, so concurrent operations share one
// sync (group commit on top of storage's own). Before each write it may
// linger (package linger) for the submitters the last write released, such
// as a consumer's ack after its receive.
type Journal struct {
	log *storage.Log
	// syncEach: the log was opened without syncs of its own and the journal
	// syncs it after every append (see OpenLog).
	syncEach bool
	now      func() int64 // record timestamps, unix ms

	mu        sync.Mutex // guards pending, waiters, submitted, closed, afterSync, failed, snap's counters
	pending   []batch.Record
	waiters   []chan error
	submitted int64 // records ever submitted, i.e. the journal offset of the next one
	afterSync []func(durable int64)
	closed    bool
	// failed is sticky: after a failed write every later submission fails
	// too, so the journal never holds an event whose predecessor was lost.
	// Reset clears it once the owner has rebuilt its state from disk.
	failed error
	snap   snapshots

	// running says a writer goroutine is up (guarded by mu): it starts with
	// the first work and ends after writerIdle without any, so a journal
	// at rest (one of 100,000 idle queues) costs no goroutine.
	running bool
	writers sync.WaitGroup // the writer goroutine, for Close
	// encoders are the snapshot encodings under way (MaybeSnapshot), which Close waits
	// for so that a snapshot taken at shutdown is still written. closing (guarded by mu)
	// refuses new ones first, so that no Add races Close's Wait.
	encoders sync.WaitGroup
	closing  bool
	pol      linger.Policy // the writer's; only the running writer touches it
	kick     chan struct{} // one token: there is work
}

// writerIdle is how long a journal's writer waits for work before it ends;
// the next submission starts another.
var writerIdle = 5 * time.Second

var (
	// ErrClosed answers submissions after Close.
	ErrClosed = errors.New("journal closed")
	// ErrReset answers submissions that were pending when Reset ran.
	ErrReset = errors.New("journal reset after a write failure")
)

// Options configure a journal.
type Options struct {
	// SyncEach: fdatasync after every append (the log was opened by OpenLog
	// under SyncAlways and has no syncer of its own).
	SyncEach bool
	// Now gives record timestamps (the owner's clock).
	Now func() time.Time
	// Snapshots says where and how often the owner's snapshots are written.
	Snapshots SnapshotPolicy
}

// Start starts the writer of log, whose state the owner has just loaded
// (see Load): a long replay is folded into a snapshot soon.
func Start(log *storage.Log, loaded Loaded, o Options) *Journal {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	j := &Journal{
		log:       log,
		syncEach:  o.SyncEach,
		now:       func() int64 { return now().UnixMilli() },
		snap:      snapshots{SnapshotPolicy: o.Snapshots, since: loaded.Replayed, at: loaded.At},
		submitted: log.HighWatermark(),
		kick:      make(chan struct{}, 1),
	}
	return j
}

// Log is the journal's log (for Load after a failure, and for tests).
func (j *Journal) Log() *storage.Log { return j.log }

// Submit queues encoded events and returns a channel that receives nil once
// they are durable, or the error that kept them from being so.
func (j *Journal) Submit(events [][]byte) <-chan error {
	ch := make(chan error, 1)
	j.mu.Lock()
	if j.closed || j.failed != nil {
		err := j.failed
		if j.closed {
			err = ErrClosed
		}
		j.mu.Unlock()
		ch <- err
		return ch
	}
	ts := j.now()
	for _, e := range events {
		j.pending = append(j.pending, batch.Record{Timestamp: ts, Value: e})
	}
	j.submitted += int64(len(events))
	j.waiters = append(j.waiters, ch)
	j.wakeLocked()
	j.mu.Unlock()
	return ch
}

// wakeLocked tells the writer there is work, starting one if none runs.
// Called with mu held.
func (j *Journal) wakeLocked() {
	select {
	case j.kick <- struct{}{}:
	default:
	}
	if !j.running {
		j.running = true
		j.writers.Add(1)
		go j.run()
	}
}

// Reset clears a write failure, after the owner has rebuilt its state from
// what the log holds (Load), while no submission can race it.
func (j *Journal) Reset(loaded Loaded) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, w := range j.waiters {
		w <- ErrReset
	}
	j.pending, j.waiters = nil, nil
	j.failed = nil
	j.submitted = j.log.HighWatermark()
	j.snap.since, j.snap.at = loaded.Replayed, loaded.At
	j.snap.resets++
}

// onDurable runs fn (on the journal goroutine) after the next write that
// makes at least everything submitted so far durable, with the journal's
// durable end; with -1 if that write failed, or if the journal is failed or
// closed already. Snapshots use it: a snapshot may only be kept once the
// journal holds every event before it.
func (j *Journal) onDurable(fn func(durable int64)) {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		fn(-1)
		return
	}
	j.afterSync = append(j.afterSync, fn)
	j.wakeLocked()
	j.mu.Unlock()
}

// run is the writer: it writes what was submitted, one group commit at a
// time, until Close, or until writerIdle passes with nothing to write.
func (j *Journal) run() {
	defer j.writers.Done()
	idle := time.NewTimer(writerIdle)
	defer idle.Stop()
	for {
		select {
		case <-j.kick:
		case <-idle.C:
			j.mu.Lock()
			if len(j.waiters) == 0 && len(j.afterSync) == 0 && !j.closed {
				j.running = false
				j.mu.Unlock()
				return
			}
			j.mu.Unlock()
			idle.Reset(writerIdle)
			continue // work came with the timer: its kick is waiting
		}
		pol := &j.pol
		if expect, wait := pol.Next(); wait > 0 {
			linger.Wait(expect, wait, j.pendingWaiters, j.kick, nil)
		}
		j.mu.Lock()
		recs, waiters, after, closed, err := j.pending, j.waiters, j.afterSync, j.closed, j.failed
		j.pending, j.waiters, j.afterSync = nil, nil, nil
		j.mu.Unlock()

		began := time.Now()
		if err == nil {
			err = j.write(recs)
		}
		if len(recs) > 0 {
			pol.Committed(len(waiters), time.Since(began))
		}
		if err != nil {
			j.mu.Lock()
			j.failed = err
			j.mu.Unlock()
		}
		for _, w := range waiters {
			w <- err
		}
		durable := int64(-1)
		if err == nil {
			durable = j.log.HighWatermark()
		}
		for _, fn := range after {
			fn(durable)
		}
		if closed {
			return
		}
		idle.Reset(writerIdle)
	}
}

// pendingWaiters is how many submissions wait for the next write; once the
// journal is closing, as many as anyone could wait for, so a linger ends.
func (j *Journal) pendingWaiters() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return math.MaxInt
	}
	return len(j.waiters)
}

// maxBatchBytes keeps each journal batch well under storage's batch limit.
const maxBatchBytes = 512 << 10

func (j *Journal) write(recs []batch.Record) error {
	if len(recs) == 0 {
		return nil
	}
	var batches [][]byte
	start, size := 0, 0
	for i, r := range recs {
		size += len(r.Value) + 16
		if size >= maxBatchBytes || i == len(recs)-1 {
			b, err := batch.Build(recs[start:i+1], batch.Options{})
			if err != nil {
				return fmt.Errorf("journal: %w", err)
			}
			batches = append(batches, b)
			start, size = i+1, 0
		}
	}
	if _, err := j.log.Append(context.Background(), batches...); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if j.syncEach {
		if err := j.log.Sync(); err != nil {
			return fmt.Errorf("journal: %w", err)
		}
	}
	return nil
}

// OpenLog opens a journal's log. Under SyncAlways the log is opened with
// SyncNever and the journal syncs it itself after each append (syncEach, for
// Options.SyncEach): the journal is the log's only appender and already
// groups its submitters, so storage's syncer goroutine would only add two
// hand-offs to the latency of every operation. Under the other policies the
// journal follows the log's policy as every log does.
func OpenLog(o storage.Options) (log *storage.Log, syncEach bool, err error) {
	if o.Sync.Mode == storage.SyncAlways {
		o.Sync, syncEach = storage.SyncPolicy{Mode: storage.SyncNever}, true
	}
	log, err = storage.Open(o)
	return log, syncEach, err
}

// Close writes what is pending, stops the goroutine and closes the log.
func (j *Journal) Close() error {
	j.mu.Lock()
	j.closing = true
	j.mu.Unlock()
	j.encoders.Wait()
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		j.writers.Wait()
		return nil
	}
	j.closed = true
	j.wakeLocked() // a writer flushes what is pending, then ends
	j.mu.Unlock()
	j.writers.Wait()
	return j.log.Close()
}
