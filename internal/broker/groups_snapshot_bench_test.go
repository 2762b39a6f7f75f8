package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/group"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// BenchmarkGroupJournalSnapshot: what a single node's consumer-group journal snapshot
// costs the groups' lock (every JoinGroup, heartbeat and offset commit of the node waits
// for it): 2,000 groups of 100 committed offsets each (200,000 offsets). "at-once" is the
// capture and its encoding together, as every snapshot was taken under the lock before;
// "capture" is what the lock is held for now (groupRT.captureLocked); "encode" the rest,
// on the journal's encoding goroutine.
//
//	go test -run '^$' -bench GroupJournalSnapshot ./internal/broker/
func BenchmarkGroupJournalSnapshot(b *testing.B) {
	br, err := Open(Options{Dir: "/data", FS: vfs.NewMem(), Logger: quietLogger(), HeadroomBytes: testHeadroom})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	g, err := br.groups()
	if err != nil {
		b.Fatal(err)
	}
	at := time.UnixMilli(1_700_000_000_000)
	g.mu.Lock()
	for n := range 2000 {
		ev := group.Event{Type: group.EventOffsetsCommitted, Group: fmt.Sprintf("group-%d", n), Time: at}
		for p := range 100 {
			ev.Offsets = append(ev.Offsets, group.CommittedOffset{Topic: fmt.Sprintf("topic-%d", n%50), Partition: int32(p),
				Committed: group.Committed{Offset: int64(p * 1000), LeaderEpoch: -1, CommitTime: at}})
		}
		if err := g.coord.Apply(ev); err != nil {
			b.Fatal(err)
		}
	}
	g.mu.Unlock()
	capture := func() func() ([]byte, error) {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.captureLocked()
	}
	body, err := capture()()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("at-once", func(b *testing.B) {
		for b.Loop() {
			g.mu.Lock()
			_, err := g.captureLocked()()
			g.mu.Unlock()
			if err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(body)), "snapshot-bytes")
	})
	b.Run("capture", func(b *testing.B) {
		for b.Loop() {
			capture()
		}
	})
	b.Run("encode", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			encode := capture()
			b.StartTimer()
			if _, err := encode(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
