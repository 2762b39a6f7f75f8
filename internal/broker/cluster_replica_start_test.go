package broker

import (
	"errors"
	"testing"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/storage"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// TestReplicaStartKeptOnceItsSnapshotIsStored: a log start raised by DeleteRecords (a trim
// entry) is kept on disk only once a snapshot whose checkpoint names it is stored
// (CheckpointStored), never by the checkpoint itself. A crash after the checkpoint and
// before the store restarts from the snapshot before, and the entries applied again
// before the trim find every record below the start (they used to find it kept, the
// records gone); a crash after the store keeps it; and a checkpoint restored on a disk
// that did not keep its start raises it again, so what DeleteRecords deleted stays deleted.
func TestReplicaStartKeptOnceItsSnapshotIsStored(t *testing.T) {
	mem := vfs.NewMem()
	_, r := openReplicaLog(t, mem)
	apply := func(r *replicaLog, n int) {
		t.Helper()
		for range n {
			raw, err := batch.Build([]batch.Record{{Timestamp: 1, Value: []byte("v")}}, batch.Options{LeaderEpoch: -1})
			if err != nil {
				t.Fatal(err)
			}
			if res, err := r.Apply(2, [][]byte{raw}); err != nil || res[0].Err != nil {
				t.Fatalf("apply: %+v %v", res, err)
			}
		}
	}
	checkpoint := func() []byte {
		t.Helper()
		cp, err := r.Checkpoint()
		if err != nil {
			t.Fatal(err)
		}
		return cp
	}
	// after reopens the replica from a crash image of the disk, whose log must start at
	// disk, and restores cp.
	after := func(what string, cp []byte, disk, wantStart int64) {
		t.Helper()
		b, err := Open(Options{Dir: "/data", FS: mem.CrashClone(), Logger: quietLogger(), HeadroomBytes: testHeadroom})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		_, p, err := b.streams.partition("t", 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.log.LogStartOffset(); got != disk {
			t.Fatalf("%s: the disk kept the log start %d, want %d", what, got, disk)
		}
		re := &replicaLog{b: b, p: p, appliedEnd: -1, withState: atLevel}
		if err := re.Restore(cp); err != nil {
			t.Fatalf("%s: restore: %v", what, err)
		}
		if got := p.log.LogStartOffset(); got != wantStart {
			t.Fatalf("%s: the log starts at %d, want %d", what, got, wantStart)
		}
		if _, err := p.log.Read(wantStart, 1<<20); err != nil {
			t.Fatalf("%s: read at the start %d: %v", what, wantStart, err)
		}
		if wantStart > 0 {
			if _, err := p.log.Read(wantStart-1, 1<<20); !errors.Is(err, storage.ErrOffsetOutOfRange) {
				t.Fatalf("%s: read below the start: %v, want ErrOffsetOutOfRange", what, err)
			}
		}
	}

	apply(r, 10)
	before := checkpoint() // the snapshot at which a restart would begin
	r.CheckpointStored(before)
	if res, err := r.Trim(6); err != nil || res.Err != nil {
		t.Fatalf("trim: %+v %v", res, err)
	}
	apply(r, 2)
	trimmed := checkpoint() // names start 6; its snapshot is not stored yet
	after("a crash before the snapshot is stored, restarting from the one before", before, 0, 0)
	after("a crash after the snapshot is stored, before its start is kept", trimmed, 0, 6)
	r.CheckpointStored(trimmed)
	after("a crash after the start is kept", trimmed, 6, 6)
}
