package raftstore

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/sluice-mq/sluice/internal/batch"
	pb "go.etcd.io/raft/v3/raftpb"
)

// ErrTermTooLarge: an entry's term does not fit a batch's 32-bit leader
// epoch. A group would need two billion elections to get there.
var ErrTermTooLarge = errors.New("raftstore: term over 2^31-1")

// ErrDamaged: an entry the group must serve cannot be read back as it was
// written (quarantined by storage, or decoded wrong). The group's copy of
// its log is unusable: the host stops the group and re-replicates it.
var ErrDamaged = errors.New("raftstore: damaged raft log")

// appendEntry appends e to dst as one batch of one record (see the package doc).
func appendEntry(dst []byte, e pb.Entry) ([]byte, error) {
	if e.Term > math.MaxInt32 {
		return dst, fmt.Errorf("%w: entry %d has term %d", ErrTermTooLarge, e.Index, e.Term)
	}
	if e.Type < 0 || e.Type > pb.EntryConfChangeV2 {
		return dst, fmt.Errorf("raftstore: entry %d has unknown type %d", e.Index, e.Type)
	}
	rec := [1]batch.Record{{Key: []byte{byte(e.Type)}, Value: e.Data}}
	return batch.AppendBuild(dst, rec[:], batch.Options{BaseOffset: int64(e.Index), LeaderEpoch: int32(e.Term)})
}

// encodeBufs holds the buffers Append encodes a Ready's entries into: storage.Log.Append
// copies what it writes and keeps nothing of its arguments, so one buffer serves every
// Append instead of two allocations per entry (the batch and its record) for the GC to
// collect. Buffers past maxPooledEncode are left to the GC, so a rare huge Append does not
// stay pinned.
var encodeBufs = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledEncode = 4 << 20

// decodeEntry reads back what appendEntry wrote, checking that the batch
// holds one entry at index want. Data aliases b.
func decodeEntry(b []byte, want uint64) (pb.Entry, error) {
	h, err := batch.ParseHeader(b)
	if err != nil {
		return pb.Entry{}, fmt.Errorf("%w: entry %d: %v", ErrDamaged, want, err)
	}
	if h.BaseOffset != int64(want) || h.RecordCount != 1 || h.LastOffsetDelta != 0 || h.PartitionLeaderEpoch < 0 {
		return pb.Entry{}, fmt.Errorf("%w: entry %d: batch at %d holds %d records, epoch %d", ErrDamaged, want, h.BaseOffset, h.RecordCount, h.PartitionLeaderEpoch)
	}
	for r, err := range batch.Records(b) {
		if err != nil {
			return pb.Entry{}, fmt.Errorf("%w: entry %d: %v", ErrDamaged, want, err)
		}
		if len(r.Key) != 1 || r.Key[0] > byte(pb.EntryConfChangeV2) {
			return pb.Entry{}, fmt.Errorf("%w: entry %d: bad type key %x", ErrDamaged, want, r.Key)
		}
		return pb.Entry{Term: uint64(h.PartitionLeaderEpoch), Index: want, Type: pb.EntryType(r.Key[0]), Data: r.Value}, nil
	}
	return pb.Entry{}, fmt.Errorf("%w: entry %d: no record", ErrDamaged, want)
}
