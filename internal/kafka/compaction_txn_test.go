package kafka

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testproc"
)

// TestCompactionTransactionsBinary runs the real binary with its cleaner
// every 20 ms: franz-go produces transactions to a compacted topic (one
// in three aborted), the cleaner runs, and then a read_committed consumer
// from the beginning sees exactly the latest committed value of every
// key, no aborted record, offsets increasing; read_uncommitted no longer
// sees any aborted record once the cleaner has passed (Kafka's behaviour too);
// kcat (librdkafka) with isolation.level=read_committed sees the same.
func TestCompactionTransactionsBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := testproc.Build(t, t.TempDir())
	proc := testproc.Serve(t, bin, "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0", "--kafka-addr", "127.0.0.1:0",
		"--sqs-addr", "", "--segment-bytes", "8KiB", "--compaction-interval", "20ms")
	n := &node{t: t, addr: proc.Addr("kafka")}
	ctx := testCtx(t, 90*time.Second)
	if r, err := kadm.NewClient(n.client()).CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": strp("compact"),
		"min.cleanable.dirty.ratio": strp("0.01"), "delete.retention.ms": strp("0"), "segment.bytes": strp("4096")}, "txkv"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	pr := n.client(kgo.DefaultProduceTopic("txkv"), kgo.TransactionalID("etl"), kgo.ProducerLinger(0))
	defer pr.Close()
	latest := map[string]string{}
	const txns, perTxn = 30, 40
	for i := range txns {
		if err := pr.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		commit := i%3 != 1
		pending := map[string]string{}
		for j := range perTxn {
			k := fmt.Sprintf("key-%02d", (i*7+j)%25)
			v := fmt.Sprintf("committed %d/%d", i, j)
			if !commit {
				v = fmt.Sprintf("aborted %d/%d", i, j)
			}
			pending[k] = v
			pr.Produce(ctx, &kgo.Record{Key: []byte(k), Value: []byte(v)}, nil)
		}
		if err := pr.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := pr.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end transaction %d: %v", i, err)
		}
		if commit {
			for k, v := range pending {
				latest[k] = v
			}
		}
	}
	// A last plain record, larger than segment.bytes and uncompressed, so
	// the log rolls before it: it is alone in the active segment (which is
	// never cleaned) and every transaction is in a sealed, cleanable one.
	// A small record left the last ~4 KiB of transactions in the active
	// segment: two aborted ones when franz-go's batches compressed well.
	plain := n.client(kgo.DefaultProduceTopic("txkv"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	defer plain.Close()
	endValue := strings.Repeat("e", 5000)
	if err := plain.ProduceSync(ctx, &kgo.Record{Key: []byte("end"), Value: []byte(endValue)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	latest["end"] = endValue
	consume := func(level kgo.IsolationLevel) (vals map[string]string, records, aborted int) {
		t.Helper()
		offs, err := kadm.NewClient(n.client()).ListEndOffsets(ctx, "txkv")
		if err != nil {
			t.Fatal(err)
		}
		end, _ := offs.Lookup("txkv", 0)
		c := n.client(kgo.ConsumeTopics("txkv"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(level))
		defer c.Close()
		vals, last := map[string]string{}, int64(-1)
		for last < end.Offset-1 {
			fs := c.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatal(err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				if r.Offset <= last {
					t.Fatalf("offset %d after %d", r.Offset, last)
				}
				last, records = r.Offset, records+1
				vals[string(r.Key)] = string(r.Value)
				if strings.HasPrefix(string(r.Value), "aborted") {
					aborted++
				}
			})
		}
		return vals, records, aborted
	}
	// Wait for the cleaner to reach every aborted record (all are in
	// sealed segments).
	var uncommitted, total int
	start := time.Now()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, records, aborted := consume(kgo.ReadUncommitted())
		uncommitted, total = aborted, records
		if aborted == 0 && records < txns*perTxn/4 || time.Now().After(deadline) {
			break
		}
	}
	if uncommitted > 0 {
		t.Fatalf("read_uncommitted still sees %d aborted records (of %d) %v after the last write", uncommitted, total, time.Since(start).Round(time.Second))
	}
	vals, records, aborted := consume(kgo.ReadCommitted())
	if aborted != 0 {
		t.Fatalf("read_committed saw %d aborted records", aborted)
	}
	for k, v := range latest {
		if vals[k] != v {
			t.Fatalf("read_committed: key %s = %q, latest committed %q", k, vals[k], v)
		}
	}
	if len(vals) != len(latest) {
		t.Fatalf("read_committed: %d keys, want %d", len(vals), len(latest))
	}
	t.Logf("%d transactions of %d records: read_committed reads %d records after cleaning", txns, perTxn, records)
	// librdkafka, read_committed, from the beginning to the end.
	out := n.kcat("", "-C", "-t", "txkv", "-o", "beginning", "-e", "-q", "-X", "isolation.level=read_committed", "-f", "%k=%s\n")
	fromKcat := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(line, "=")
		if strings.HasPrefix(v, "aborted") {
			t.Fatalf("kcat read_committed saw %q", line)
		}
		fromKcat[k] = v
	}
	for k, v := range latest {
		if fromKcat[k] != v {
			t.Fatalf("kcat: key %s = %q, want %q", k, fromKcat[k], v)
		}
	}
}
