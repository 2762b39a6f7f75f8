package broker

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/storage"
)

// Compacted topics (cleanup.policy=compact or compact,delete).
//
// The cleaner is storage's (storage.Log.Clean); the broker decides when it
// runs and with what: a goroutine started with the maintenance passes over
// every partition of every compacted topic each CompactionInterval, one
// partition at a time, with the topic's delete.retention.ms,
// min/max.compaction.lag.ms and min.cleanable.dirty.ratio and the broker's
// buffer and rate limit. Produce refuses a record without a key to a
// compacted topic (ErrKeyRequired), as Kafka does.
//
// What a cleaner pass removes is only ever below every subscription's
// floor (a queue subscription on a compacted topic never finds a message it
// still holds compacted away) and below the last stable offset, with the
// aborted index handed to the cleaner (txn_clean.go). In a cluster, a replica cleans its own
// log when its topic has no subscription (cluster_compaction.go says why).

// DefaultCompactionInterval is Options.CompactionInterval's default.
const DefaultCompactionInterval = 15 * time.Second

// cleanerRT is the broker's cleaner: its goroutine and its totals.
type cleanerRT struct {
	bytesRead, bytesWritten        atomic.Int64
	passes                         atomic.Int64
	abortedRemoved, markersRemoved atomic.Int64  // records of aborted transactions, transaction markers
	done                           chan struct{} // closed when the goroutine ends; nil if never started
}

// cleanState is one partition's last clean.
type cleanState struct {
	mu         sync.Mutex
	lastClean  time.Time // last pass that rewrote segments; zero: never
	dirtyRatio float64   // as the last pass found it
}

func (c *cleanerRT) wait() {
	if c.done != nil {
		<-c.done
	}
}

// startCleaner runs CleanCompacted every CompactionInterval until stop.
func (b *Broker) startCleaner(stop <-chan struct{}) {
	every := b.opts.CompactionInterval
	if every <= 0 {
		every = DefaultCompactionInterval
	}
	b.cleaner.done = make(chan struct{})
	go func() {
		defer close(b.cleaner.done)
		t := time.NewTimer(untilAligned(every))
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				b.CleanCompacted(stop)
				t.Reset(untilAligned(every))
			}
		}
	}()
}

// CleanCompacted runs one cleaner pass over every partition of every
// compacted topic (tests call it with the broker's injected clock), and
// returns the first error; the others are logged. A pass stops early when
// stop closes (nil: never).
func (b *Broker) CleanCompacted(stop <-chan struct{}) error {
	if b.streams == nil {
		return nil
	}
	var first error
	for _, t := range b.streams.topicList() {
		s, parts := t.snapshot()
		if !s.Compacted() {
			continue
		}
		for _, p := range parts {
			err := b.cleanPartition(t, p, s, stop)
			if err != nil {
				b.log.Warn("compaction failed", "topic", s.Name, "partition", p.index, "err", err)
				if first == nil {
					first = err
				}
			}
		}
	}
	return first
}

func (b *Broker) cleanPartition(t *topicRT, p *partitionRT, s TopicSettings, stop <-chan struct{}) error {
	if b.cluster != nil && !b.cluster.cleanable(p) {
		return nil // cluster_compaction.go
	}
	o := storage.CleanOptions{
		MinDirtyRatio:    s.MinCleanableDirtyRatio,
		MinCompactionLag: s.MinCompactionLag, MaxCompactionLag: s.MaxCompactionLag,
		DeleteRetention: s.DeleteRetention,
		BufferBytes:     b.opts.CompactionBufferBytes, BytesPerSecond: b.opts.CompactionBytesPerSec,
		Stop: stop,
	}
	o.Below, o.Txns = b.cleanBound(p, t.subscriptionFloor(p)) // txn_clean.go
	switch {
	case o.MinDirtyRatio == 0:
		o.MinDirtyRatio = DefaultMinCleanableDirtyRatio
	case o.MinDirtyRatio < 0:
		o.MinDirtyRatio = 0
	}
	switch {
	case o.DeleteRetention == 0:
		o.DeleteRetention = DefaultDeleteRetention
	case o.DeleteRetention < 0:
		o.DeleteRetention = 0
	}
	st, err := p.log.Clean(o)
	b.cleaner.bytesRead.Add(st.BytesRead)
	b.cleaner.bytesWritten.Add(st.BytesWritten)
	b.cleaner.abortedRemoved.Add(st.AbortedRemoved)
	b.cleaner.markersRemoved.Add(st.MarkersRemoved)
	p.clean.mu.Lock()
	p.clean.dirtyRatio = st.DirtyRatio()
	if st.Cleaned {
		p.clean.lastClean = b.now()
		b.cleaner.passes.Add(1)
	}
	p.clean.mu.Unlock()
	if st.Cleaned {
		b.log.Debug("compacted", "topic", s.Name, "partition", p.index, "segments_in", st.SegmentsIn,
			"segments_out", st.SegmentsOut, "records_removed", st.RecordsRemoved, "bytes_read", st.BytesRead,
			"bytes_written", st.BytesWritten)
	}
	if errors.Is(err, storage.ErrClosed) {
		return nil // closing
	}
	return err
}

// subscriptionFloor is the lowest offset of partition p a subscription
// still holds (0 when there is no subscription: no bound).
func (t *topicRT) subscriptionFloor(p *partitionRT) int64 {
	t.mu.RLock()
	subs := make([]*subRT, 0, len(t.subs))
	for _, sub := range t.subs {
		subs = append(subs, sub)
	}
	t.mu.RUnlock()
	if len(subs) == 0 {
		return 0
	}
	floor := p.log.HighWatermark()
	for _, sub := range subs {
		floor = min(floor, sub.floor(p.index))
	}
	return max(floor, 1) // 0 would mean "no bound"; a floor of 0 cleans nothing anyway
}

// compacted reports the topic's current policy.
func (t *topicRT) compacted() bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.settings.Compacted()
}

// checkKeys refuses a batch holding a record without a key (produced to a
// compacted topic). Compressed batches are inflated for it.
func checkKeys(c storage.Checked) error {
	for i := range c.Len() {
		n := 0
		for r, err := range batch.Records(c.Batch(i)) {
			if err != nil {
				return fmt.Errorf("%w: batch %d: %v", ErrCorruptBatch, i, err)
			}
			if r.Key == nil {
				return fmt.Errorf("%w: batch %d, record %d", ErrKeyRequired, i, n)
			}
			n++
		}
	}
	return nil
}

// CompactionStat is one compacted partition's cleaner state, for metrics.
type CompactionStat struct {
	Topic      string
	Partition  int32
	DirtyRatio float64
	LastClean  time.Time // zero: never cleaned by this process
}

// CompactionTotals are the cleaner's counters since the broker opened.
type CompactionTotals struct {
	BytesRead, BytesWritten, Passes int64
	AbortedRemoved, MarkersRemoved  int64 // records of aborted transactions, transaction markers
}

// CompactionStats lists every compacted partition's cleaner state and the
// cleaner's totals.
func (b *Broker) CompactionStats() ([]CompactionStat, CompactionTotals) {
	tot := CompactionTotals{BytesRead: b.cleaner.bytesRead.Load(), BytesWritten: b.cleaner.bytesWritten.Load(),
		Passes: b.cleaner.passes.Load(), AbortedRemoved: b.cleaner.abortedRemoved.Load(), MarkersRemoved: b.cleaner.markersRemoved.Load()}
	if b.streams == nil {
		return nil, tot
	}
	var out []CompactionStat
	for _, t := range b.streams.topicList() {
		s, parts := t.snapshot()
		if !s.Compacted() {
			continue
		}
		for _, p := range parts {
			p.clean.mu.Lock()
			out = append(out, CompactionStat{Topic: s.Name, Partition: p.index, DirtyRatio: p.clean.dirtyRatio, LastClean: p.clean.lastClean})
			p.clean.mu.Unlock()
		}
	}
	return out, tot
}
