package broker

import (
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
