package broker

import (
	"sort"
	"strconv"
	"time"

	"github.com/sluice-mq/sluice/internal/storage"
)

// StorageStats is the state of the broker's storage as a whole, for
// /metrics: the file-descriptor cache every log shares, the damaged batches
// found, and whether writes work.
type StorageStats struct {
	OpenFiles, MaxOpenFiles int   // descriptors the logs hold now, and their bound
	FileEvictions           int64 // files closed to make room since the start
	CorruptBatches          int64 // damaged batches quarantined since the start
	WriteFailure            error // nil while writes work; else why not (Health)
}

// StorageStats reports the broker's storage state.
func (b *Broker) StorageStats() StorageStats {
	fs := b.opts.Files.Stats()
	return StorageStats{OpenFiles: fs.Open, MaxOpenFiles: fs.MaxOpen, FileEvictions: fs.Evictions,
		CorruptBatches: fs.CorruptBatches, WriteFailure: b.Health()}
}

// CorruptBatch is one damaged range of a log, quarantined: its offsets are
// skipped by every reader (docs/operations.md, "Corruption").
type CorruptBatch struct {
	Owner       string // "queue emails", "queue emails (journal)", "topic orders/2", …
	Segment     string // the segment file
	Position    int64  // byte position in it
	Length      int64
	FirstOffset int64
	LastOffset  int64 // FirstOffset-1: it held no offsets
	Found       time.Time
	Reason      string
}

// Corruption lists every quarantined batch of every log, oldest first.
func (b *Broker) Corruption() []CorruptBatch {
	var out []CorruptBatch
	add := func(owner string, l *storage.Log) {
		if l == nil {
			return
		}
		for _, q := range l.Quarantined() {
			out = append(out, CorruptBatch{Owner: owner, Segment: q.Segment, Position: q.Position, Length: q.Length,
				FirstOffset: q.FirstOffset, LastOffset: q.LastOffset, Found: q.Found, Reason: q.Reason})
		}
	}
	journal := func(m *machine) *storage.Log {
		if m.jr == nil {
			return nil
		}
		return m.jr.Log()
	}
	b.mu.RLock()
	for name, q := range b.queues {
		add("queue "+name, q.log)
		add("queue "+name+" (journal)", journal(&q.machine))
	}
	b.mu.RUnlock()
	for _, t := range b.streams.topicList() {
		_, parts := t.snapshot()
		for _, p := range parts {
			add("topic "+t.name+"/"+strconv.Itoa(int(p.index)), p.log)
		}
		t.mu.RLock()
		for name, sub := range t.subs {
			add("subscription "+subKey(t.name, name)+" (journal)", journal(&sub.machine))
		}
		t.mu.RUnlock()
	}
	if g, err := b.groups(); err == nil {
		add("groups (journal)", journal(&g.machine))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Found.Before(out[j].Found) })
	return out
}
