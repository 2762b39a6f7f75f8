package replqueue

import (
	"runtime"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/queue"
)

// BenchmarkBacklogSnapshot: what a backlog costs a replica, since every unfinished body is
// held in memory and every snapshot encodes all of them (docs/cluster.md, "Queues in a
// cluster"). The machine holds 100,000 messages of 1 KiB; reported: heap per message and
// the time and size of one Snapshot.
//
//	go test -run '^$' -bench BacklogSnapshot -benchtime 5x ./internal/cluster/replqueue/
func BenchmarkBacklogSnapshot(b *testing.B) {
	const n, size = 100_000, 1024
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m, err := NewMachine(1, queue.Config{})
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, size)
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ents := make([]multiraft.Entry, 0, 1000)
	for i := range n {
		c := Command{Op: OpSend, Origin: 2, Request: uint64(i + 1), Now: now, Body: body}
		ents = append(ents, multiraft.Entry{Index: uint64(i + 1), Term: 1, Data: c.Encode(nil)})
		if len(ents) == cap(ents) {
			if err := m.Apply(ents); err != nil {
				b.Fatal(err)
			}
			ents = ents[:0]
		}
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	b.ResetTimer() // (it also drops metrics reported before it)
	var snap []byte
	for range b.N {
		if snap, err = m.Snapshot(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(snap))/(1<<20), "snapshot-MiB")
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/msg")
}
