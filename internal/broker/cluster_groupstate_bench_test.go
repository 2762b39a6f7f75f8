package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/group"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// BenchmarkMetadataSnapshot: what a metadata snapshot costs the Ready loop with the
// consumer groups' state in it (feature level 3 and up): 2,000 groups of 100 committed
// offsets each (200,000 offsets, a snapshot of ~3.4 MB), the broker's own hook over a
// journal in memory. "at-once" is Snapshot (the journal's checkpoint, the state's events,
// their encoding: all in the loop, as before); "capture" is what the loop pays now
// (meta/capture.go); "encode" the rest, on the encoding's goroutine.
//
//	go test -run '^$' -bench MetadataSnapshot ./internal/broker/
func BenchmarkMetadataSnapshot(b *testing.B) {
	br, err := Open(Options{Dir: "/data", FS: vfs.NewMem(), Logger: quietLogger(), HeadroomBytes: testHeadroom})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	m := meta.NewMachine(1)
	if err := m.SetGroupOffsets(newClusterGroups(br.streams.groups, nil)); err != nil {
		b.Fatal(err)
	}
	index := uint64(0)
	apply := func(c meta.Command) {
		index++
		c.Origin, c.Request = 9, index
		if err := m.Apply([]multiraft.Entry{{Index: index, Term: 1, Data: c.Encode(nil)}}); err != nil {
			b.Fatal(err)
		}
	}
	apply(meta.Command{Op: meta.OpSetFeatureLevel, Level: meta.MaxFeatureLevel})
	at := time.UnixMilli(1_700_000_000_000)
	for g := range 2000 {
		ev := group.Event{Type: group.EventOffsetsCommitted, Group: fmt.Sprintf("group-%d", g), Time: at}
		for p := range 100 {
			ev.Offsets = append(ev.Offsets, group.CommittedOffset{Topic: fmt.Sprintf("topic-%d", g%50), Partition: int32(p),
				Committed: group.Committed{Offset: int64(p * 1000), LeaderEpoch: -1, CommitTime: at}})
		}
		payload, err := encodeGroupEvents([]group.Event{ev})
		if err != nil {
			b.Fatal(err)
		}
		apply(meta.Command{Op: meta.OpGroupOffsets, Payload: payload})
	}
	snap, err := m.Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("at-once", func(b *testing.B) {
		for b.Loop() {
			if _, err := m.Snapshot(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(snap))/(1<<20), "snapshot-MiB")
	})
	b.Run("capture", func(b *testing.B) {
		for b.Loop() {
			if _, err := m.CaptureSnapshot(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			encode, err := m.CaptureSnapshot()
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if _, err := encode(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
