package broker

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

// journal appends state-machine events to a log in the order they were
// submitted, and tells each submitter when its events are durable.
//
// Submitters call submit while holding their state machine's lock, so the
// journal's order is the order in which the events were applied in memory;
// they wait for durability after releasing that lock. One goroutine writes:
// everything submitted while it waits for the previous fdatasync goes into the
// next append, so concurrent operations share one sync (group commit on top of
// storage's own). Before each write it may linger (package linger) for the
// submitters the last write released, such as a consumer's ack after its
// receive.
type journal struct {
	log *storage.Log
	// syncEach: the log was opened without syncs of its own and the journal
	// syncs it after every append (see openJournalLog).
	syncEach bool
	now      func() int64 // record timestamps, unix ms

	mu        sync.Mutex // guards pending, waiters, submitted, closed, afterSync
	pending   []batch.Record
	waiters   []chan error
	submitted int64 // records ever submitted, i.e. the journal offset of the next one
	afterSync []func(durable int64)
	closed    bool
	// failed is sticky: after a failed write every later submission fails
	// too, so the journal never holds an event whose predecessor was lost.
	// reset clears it once the owner has rebuilt its state from disk.
	failed error
	snap   snapshotter

	kick chan struct{} // one token: there is work
	done chan struct{} // closed when run returns
}

var (
	errJournalClosed = errors.New("journal closed")
	errJournalReset  = errors.New("journal reset after a write failure")
)

// newJournal starts the writer of log. snap says where and how often the
// owner's snapshots are written.
func newJournal(log *storage.Log, syncEach bool, now func() int64, snap snapshotter) *journal {
	j := &journal{
		log:       log,
		syncEach:  syncEach,
		now:       now,
		snap:      snap,
		submitted: log.HighWatermark(),
		kick:      make(chan struct{}, 1),
		done:      make(chan struct{}),
	}
	go j.run()
	return j
}

// submit queues encoded events and returns a channel that receives nil once
// they are durable, or the error that kept them from being so.
func (j *journal) submit(events [][]byte) <-chan error {
	ch := make(chan error, 1)
	j.mu.Lock()
	if j.closed || j.failed != nil {
		err := j.failed
		if j.closed {
			err = errJournalClosed
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
	j.mu.Unlock()
	select {
	case j.kick <- struct{}{}:
	default:
	}
	return ch
}

// reset clears a write failure. The owner calls it after rebuilding its
// state from what the journal holds, while no submission can race it.
func (j *journal) reset() {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, w := range j.waiters {
		w <- errJournalReset
	}
	j.pending, j.waiters = nil, nil
	j.failed = nil
	j.submitted = j.log.HighWatermark()
}

// onDurable runs fn (on the journal goroutine) after the next write that
// makes at least everything submitted so far durable. Snapshots use it:
// a snapshot may only be kept once the journal holds every event before it.
func (j *journal) onDurable(fn func(durable int64)) {
	j.mu.Lock()
	j.afterSync = append(j.afterSync, fn)
	j.mu.Unlock()
	select {
	case j.kick <- struct{}{}:
	default:
	}
}

func (j *journal) run() {
	defer close(j.done)
	var pol linger.Policy
	for range j.kick {
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
		if err == nil {
			durable := j.log.HighWatermark()
			for _, fn := range after {
				fn(durable)
			}
		}
		if closed {
			return
		}
	}
}

// pendingWaiters is how many submissions wait for the next write; once the
// journal is closing, as many as anyone could wait for, so a linger ends.
func (j *journal) pendingWaiters() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return math.MaxInt
	}
	return len(j.waiters)
}

// maxJournalBatch keeps each journal batch well under storage's batch limit.
const maxJournalBatch = 512 << 10

func (j *journal) write(recs []batch.Record) error {
	if len(recs) == 0 {
		return nil
	}
	var batches [][]byte
	start, size := 0, 0
	for i, r := range recs {
		size += len(r.Value) + 16
		if size >= maxJournalBatch || i == len(recs)-1 {
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

// openJournalLog opens the journal log in dir. Under SyncAlways the log is
// opened with SyncNever and the journal syncs it itself after each append
// (syncEach): the journal is the log's only appender and already groups its
// submitters, so storage's syncer goroutine would only add two hand-offs to
// the latency of every receive and ack. Under the other policies the
// journal follows the broker's policy as every log does.
func (b *Broker) openJournalLog(dir string) (log *storage.Log, syncEach bool, err error) {
	o := b.logOptions(dir, journalSegmentBytes)
	if o.Sync.Mode == storage.SyncAlways {
		o.Sync, syncEach = storage.SyncPolicy{Mode: storage.SyncNever}, true
	}
	log, err = storage.Open(o)
	return log, syncEach, err
}

// close writes what is pending, stops the goroutine and closes the log.
func (j *journal) close() error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		<-j.done
		return nil
	}
	j.closed = true
	j.mu.Unlock()
	j.kick <- struct{}{}
	<-j.done
	return j.log.Close()
}

// replay calls fn with each journal record from offset from to the end.
func replayLog(log *storage.Log, from int64, fn func(offset int64, value []byte) error) error {
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
