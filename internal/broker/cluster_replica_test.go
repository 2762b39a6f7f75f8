package broker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// TestReplicaPulledPastAppliedIsCut: a follower's snapshot preparation pulls
// records past what it applied (AppendRange), then raft does not take the
// snapshot — it found the snapshot's entry in its own log and only moved its
// commit index — and applies the entries that hold those records itself.
// They must be stored once, at the offsets every replica gives them; before
// Apply cut the pulled records first they were stored twice, and every later
// offset on that replica differed from the others' (TestClusterCompaction
// under -race: "offset 377 holds k3=375, k5=377 was acknowledged there").
func TestReplicaPulledPastAppliedIsCut(t *testing.T) {
	open := func() (*Broker, *replicaLog) { return openReplicaLog(t, vfs.NewMem()) }
	entry := func(vals ...string) [][]byte {
		var recs []batch.Record
		for _, v := range vals {
			recs = append(recs, batch.Record{Timestamp: 1, Value: []byte(v)})
		}
		raw, err := batch.Build(recs, batch.Options{LeaderEpoch: -1})
		if err != nil {
			t.Fatal(err)
		}
		return [][]byte{raw}
	}
	apply := func(r *replicaLog, want int64, vals ...string) {
		t.Helper()
		res, err := r.Apply(2, entry(vals...))
		if err != nil || res[0].Err != nil || res[0].Base != want {
			t.Fatalf("apply %v: %+v, %v; want base %d", vals, res, err, want)
		}
	}
	// The source replica applied both entries.
	_, src := open()
	apply(src, 0, "a", "b")
	apply(src, 2, "c", "d")
	rg, err := src.ReadRange(2, 4, 1<<20)
	if err != nil || rg.Start != 2 || rg.Next != 4 {
		t.Fatalf("read range: %+v, %v", rg, err)
	}
	// The follower applied the first, pulled the second's records, and then applies it.
	dstB, dst := open()
	apply(dst, 0, "a", "b")
	if err := dst.AppendRange(2, rg); err != nil {
		t.Fatal(err)
	}
	apply(dst, 2, "c", "d")
	apply(dst, 4, "e")
	got, err := localRecords(dstB, "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for off := int64(0); off < int64(len(got)); off++ {
		s = append(s, fmt.Sprintf("%d:%s", off, got[off]))
	}
	if strings.Join(s, " ") != "0:a 1:b 2:c 3:d 4:e" {
		t.Fatalf("follower's log: %v (%d records), want 0:a 1:b 2:c 3:d 4:e", s, len(got))
	}
}

// atLevel is a replicaLog's withState in a cluster at this build's feature level.
func atLevel() bool { return true }

// openReplicaLog opens a broker on fsys with topic t (one partition) and returns the
// partition's replicaLog, restored empty, as a replica's state machine drives it.
func openReplicaLog(t testing.TB, fsys vfs.FS) (*Broker, *replicaLog) {
	t.Helper()
	return openReplicaLogAt(t, fsys, "/data")
}

// openReplicaLogAt is openReplicaLog with the broker's data directory dir.
func openReplicaLogAt(t testing.TB, fsys vfs.FS, dir string) (*Broker, *replicaLog) {
	t.Helper()
	b, err := Open(Options{Dir: dir, FS: fsys, Logger: quietLogger(), HeadroomBytes: testHeadroom})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if _, err := b.CreateTopic(TopicSettings{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	_, p, err := b.streams.partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	r := &replicaLog{b: b, p: p, appliedEnd: -1, withState: atLevel}
	if err := r.Restore(nil); err != nil {
		t.Fatal(err)
	}
	return b, r
}
