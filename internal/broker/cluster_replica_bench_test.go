package broker

import (
	"fmt"
	"os"
	"testing"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/storage"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// BenchmarkReplicaApply: a partition replica applying committed entries of one
// idempotent batch each (16 records of 100 bytes, 8 producers in turn), on the disk
// without fsync as apply does (the Raft entry is what is durable): what apply decides with
// and keeps per entry (the producer state, what cutBack would take back) included. Runs
// of up to a few hundred MB stay in the page cache; longer ones measure the disk's write
// rate (about 82 MB/s here, the log's sync-ahead waiting on it) whatever apply costs.
func BenchmarkReplicaApply(b *testing.B) {
	br, r := openReplicaLogAt(b, vfs.Default, b.TempDir())
	// The log as a cluster replica's (topicRT.openPartition): never synced by an append.
	if err := r.p.log.Close(); err != nil {
		b.Fatal(err)
	}
	lo := br.logOptions(r.p.dir, br.segmentBytes(TopicSettings{}))
	lo.MaxBatchBytes = logMaxBatchBytes
	asReplica(&lo)
	log, err := storage.Open(lo)
	if err != nil {
		b.Fatal(err)
	}
	r.p.log = log
	const producers, records = 8, 16
	seq := make([]int32, producers)
	recs := make([]batch.Record, records)
	for i := range recs {
		recs[i] = batch.Record{Timestamp: 1, Value: make([]byte, 100)}
	}
	raws := make([][]byte, 0, b.N)
	for i := range b.N {
		k := i % producers
		raw, err := batch.Build(recs, batch.Options{LeaderEpoch: -1, Producer: &batch.Producer{ID: int64(100 + k), BaseSequence: seq[k]}})
		if err != nil {
			b.Fatal(err)
		}
		seq[k] += records
		raws = append(raws, raw)
	}
	b.SetBytes(records * 100)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		res, err := r.Apply(2, raws[i:i+1])
		if err != nil || res[0].Err != nil || res[0].Duplicate {
			b.Fatalf("entry %d: %+v %v", i, res, err)
		}
	}
}

// BenchmarkReplicaRestore: a replica restarted after a graceful stop comes back to its
// last checkpoint (Restore) with its local snapshots written at the stop, past the
// checkpoint: a checkpoint without the producer and transaction state (below feature
// level 4) made it scan the whole log for the transactions, one with the state takes it
// as it is. SLUICE_BENCH_RESTORE_MB sets the log's size (default 256); run as root with
// SLUICE_BENCH_DROP_CACHES=1 to start each Restore from a cold page cache, as a restart
// of a machine does.
func BenchmarkReplicaRestore(b *testing.B) {
	mb := envInt("SLUICE_BENCH_RESTORE_MB", 256)
	for _, withState := range []bool{false, true} {
		b.Run(fmt.Sprintf("state=%v", withState), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				r, cp := replicaRestart(b, mb, withState)
				if os.Getenv("SLUICE_BENCH_DROP_CACHES") == "1" {
					if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				if err := r.Restore(cp); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(mb), "MB")
		})
	}
}

// replicaRestart fills a replica's log with mb MiB (one transaction in it), checkpoints,
// applies a little more, stops the broker and opens it again, as a restart does, and
// returns the replica with the checkpoint to restore.
func replicaRestart(b *testing.B, mb int, withState bool) (*replicaLog, []byte) {
	dir := b.TempDir()
	br, r := openReplicaLogAt(b, vfs.Default, dir)
	r.withState = func() bool { return withState }
	recs := make([]batch.Record, 64)
	for i := range recs {
		recs[i] = batch.Record{Timestamp: 1, Value: make([]byte, 1024)}
	}
	raw, err := batch.Build(recs, batch.Options{LeaderEpoch: -1})
	if err != nil {
		b.Fatal(err)
	}
	pid := ProducerID{ID: 5 << clusterPIDShift}
	marker, err := batch.BuildMarker(pid.ID, 0, true, 1, 1)
	if err != nil {
		b.Fatal(err)
	}
	entries := [][][]byte{{txnBatch(pid, 0, "t")}, {marker}}
	for range mb * 16 { // 64 KiB an entry
		entries = append(entries, [][]byte{raw})
	}
	var cp []byte
	for i, e := range entries {
		if _, err := r.Apply(2, e); err != nil {
			b.Fatal(err)
		}
		if i == len(entries)-8 {
			if cp, err = r.Checkpoint(); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := br.Close(); err != nil { // writes the local snapshots, past the checkpoint
		b.Fatal(err)
	}
	br2, err := Open(Options{Dir: dir, FS: vfs.Default, Logger: quietLogger(), HeadroomBytes: testHeadroom})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { br2.Close() })
	_, p, err := br2.streams.partition("t", 0)
	if err != nil {
		b.Fatal(err)
	}
	return &replicaLog{b: br2, p: p, appliedEnd: -1, withState: r.withState}, cp
}
