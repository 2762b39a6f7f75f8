package raftstore

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/storage"
	"github.com/sluice-mq/sluice/internal/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// testFiles: no background scrub, so what a test reads is what it did.
var testFiles = storage.NewFileCache(storage.FileCacheOptions{ScrubBytesPerSec: -1})

func testOptions(fs vfs.FS) Options {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return Options{FS: fs, Dir: "raft", SegmentBytes: 1 << 10, Files: testFiles, Logger: quiet,
		Now: func() time.Time { return t0 }}
}

func mustOpen(t testing.TB, o Options) *Store {
	t.Helper()
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustGroup(t testing.TB, s *Store, id uint64) *Group {
	t.Helper()
	g, err := s.Group(id)
	if err != nil {
		t.Fatalf("Group(%d): %v", id, err)
	}
	return g
}

func ents(from, to, term uint64) []pb.Entry {
	var out []pb.Entry
	for i := from; i <= to; i++ {
		out = append(out, pb.Entry{Index: i, Term: term, Data: []byte{byte(i), byte(term)}})
	}
	return out
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
