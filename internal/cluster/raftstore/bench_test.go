package raftstore

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/diskprobe"
	"github.com/sluice-mq/sluice/internal/storage"
	"github.com/sluice-mq/sluice/internal/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
)

// benchEntryBytes is the data of each benchmark entry.
const benchEntryBytes = 1024

// BenchmarkSyncGroups measures one Ready round over many groups on the
// real disk: every group appends one 1 KiB entry and (state=…) commits
// it, then one Store.Sync makes all of it durable. It reports entries per
// second and the time of a round, beside the disk's own fdatasync rate
// measured in the same run:
//
//	go test -run '^$' -bench SyncGroups -benchtime 3s ./internal/cluster/raftstore
//
// conc=1 syncs the groups one after another; conc=64 issues them
// concurrently (the default). state=none appends only (a follower's round
// whose commit did not move), state=commit also moves each group's commit
// index (one more record per group in the HardState log). prealloc=1048576
// preallocates the logs' active segments (storage.Options), so their
// fdatasyncs flush data only.
func BenchmarkSyncGroups(b *testing.B) {
	if l, err := diskprobe.Measure(b.TempDir(), 500*time.Millisecond); err == nil {
		b.Logf("%s", l)
	}
	for _, groups := range []int{1, 10, 100} {
		for _, v := range []struct {
			conc     int
			state    bool
			prealloc int64
		}{{1, false, 0}, {1, true, 0}, {64, false, 0}, {64, true, 0}, {64, true, 1 << 20}} {
			name := fmt.Sprintf("groups=%d/conc=%d/state=%s/prealloc=%d", groups, v.conc,
				map[bool]string{false: "none", true: "commit"}[v.state], v.prealloc)
			b.Run(name, func(b *testing.B) { benchSyncGroups(b, groups, v.conc, v.state, v.prealloc) })
		}
	}
}

func benchSyncGroups(b *testing.B, n, conc int, state bool, prealloc int64) {
	s, err := Open(Options{Dir: b.TempDir(), SyncConcurrency: conc, PreallocateBytes: prealloc, Logger: quiet,
		Files: storage.NewFileCache(storage.FileCacheOptions{ScrubBytesPerSec: -1})})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	gs := make([]*Group, n)
	for k := range gs {
		if gs[k], err = s.Group(uint64(k + 1)); err != nil {
			b.Fatal(err)
		}
	}
	data := make([]byte, benchEntryBytes)
	b.ResetTimer()
	for i := range b.N {
		idx := uint64(i + 1)
		for _, g := range gs {
			if err := g.Append([]pb.Entry{{Index: idx, Term: 1, Data: data}}); err != nil {
				b.Fatal(err)
			}
			if state {
				if err := g.SetHardState(pb.HardState{Term: 1, Vote: 1, Commit: idx}); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := s.Sync(gs...); err != nil {
			b.Fatal(err)
		}
	}
	el := b.Elapsed()
	b.ReportMetric(float64(b.N*n)/el.Seconds(), "entries/s")
	b.ReportMetric(float64(el.Microseconds())/float64(b.N), "µs/round")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkSharedWAL is the floor of the other design: one write-ahead
// file shared by every group on the node, where a round writes all the
// groups' entries with one write and one fdatasync. It measures only that
// I/O (no framing, no read path, no checkpointing into the groups' logs,
// which that design would also pay: every entry written twice).
func BenchmarkSharedWAL(b *testing.B) {
	for _, groups := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			f, err := vfs.Default.Create(filepath.Join(b.TempDir(), "wal"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			buf := make([]byte, groups*(benchEntryBytes+70))
			b.ResetTimer()
			for range b.N {
				if _, err := f.Write(buf); err != nil {
					b.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
			}
			el := b.Elapsed()
			b.ReportMetric(float64(b.N*groups)/el.Seconds(), "entries/s")
			b.ReportMetric(float64(el.Microseconds())/float64(b.N), "µs/round")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkSnapshotStore measures what the host's Ready loop pays to store one snapshot
// a state machine encoded, on the real disk: CreateSnapshot (4 KiB of data) and the
// Compact that follows it, keeping 5 entries behind. Between stores the group appends
// and syncs 10 entries, untimed.
//
//	go test -run '^$' -bench SnapshotStore -benchtime 2s ./internal/cluster/raftstore
func BenchmarkSnapshotStore(b *testing.B) {
	if l, err := diskprobe.Measure(b.TempDir(), 500*time.Millisecond); err == nil {
		b.Logf("%s", l)
	}
	b.Run("data=4KiB", benchSnapshotStore)
}

func benchSnapshotStore(b *testing.B) {
	s, err := Open(Options{Dir: b.TempDir(), Logger: quiet, DeleteInBackground: true,
		Files: storage.NewFileCache(storage.FileCacheOptions{ScrubBytesPerSec: -1})})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	g, err := s.Group(1)
	if err != nil {
		b.Fatal(err)
	}
	entry, snap := make([]byte, benchEntryBytes), make([]byte, 4096)
	cs := &pb.ConfState{Voters: []uint64{1, 2, 3}}
	var last uint64
	var stored time.Duration
	for range b.N {
		for range 10 {
			last++
			if err := g.Append([]pb.Entry{{Index: last, Term: 1, Data: entry}}); err != nil {
				b.Fatal(err)
			}
		}
		if err := g.SetHardState(pb.HardState{Term: 1, Vote: 1, Commit: last}); err != nil {
			b.Fatal(err)
		}
		if err := s.Sync(g); err != nil {
			b.Fatal(err)
		}
		began := time.Now()
		if _, err := g.CreateSnapshot(last, cs, snap); err != nil {
			b.Fatal(err)
		}
		if err := g.Compact(last - 5); err != nil {
			b.Fatal(err)
		}
		stored += time.Since(began)
	}
	b.ReportMetric(float64(stored.Microseconds())/float64(b.N), "µs/store")
	b.ReportMetric(0, "ns/op")
}
