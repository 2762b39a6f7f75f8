package raftstore

import (
	"runtime"
	"testing"

	"github.com/sluice-mq/sluice/internal/storage"
	pb "go.etcd.io/raft/v3/raftpb"
)

// BenchmarkGroupMemory reports the live heap an open group costs, its
// storage.Log included, with a log of 30 entries over 3 terms on the real
// disk (so no file data sits in the heap):
//
//	go test -run '^$' -bench GroupMemory -benchtime 1x ./internal/cluster/raftstore
func BenchmarkGroupMemory(b *testing.B) {
	const n = 2000
	for range b.N {
		s, err := Open(Options{Dir: b.TempDir(), Logger: quiet,
			Files: storage.NewFileCache(storage.FileCacheOptions{ScrubBytesPerSec: -1, MaxOpen: 256})})
		if err != nil {
			b.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		gs := make([]*Group, n)
		for k := range gs {
			g, err := s.Group(uint64(k + 1))
			if err != nil {
				b.Fatal(err)
			}
			for term := uint64(1); term <= 3; term++ {
				if err := g.Append(ents(10*term-9, 10*term, term)); err != nil {
					b.Fatal(err)
				}
			}
			if err := g.SetHardState(pb.HardState{Term: 3, Vote: 1, Commit: 30}); err != nil {
				b.Fatal(err)
			}
			gs[k] = g
		}
		if err := s.Sync(gs...); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/group")
		runtime.KeepAlive(gs)
		s.Close()
	}
	b.ReportMetric(0, "ns/op")
}
