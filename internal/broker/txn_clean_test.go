package broker

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// kvTxn is one transactional producer writing keyed records.
type kvTxn struct {
	t   *testing.T
	b   *Broker
	id  string
	pid ProducerID
	seq int32
}

func newKVTxn(t *testing.T, b *Broker, id string) *kvTxn {
	t.Helper()
	pid, err := b.InitTransactionalProducer(id, 10*time.Minute, TxnProducer{ID: -1, Epoch: -1})
	if err != nil {
		t.Fatal(err)
	}
	return &kvTxn{t: t, b: b, id: id, pid: pid}
}

// produce writes one transactional batch of key=value pairs to kv/0.
func (p *kvTxn) produce(kvs ...string) {
	p.t.Helper()
	if errs, err := p.b.AddPartitionsToTxn(p.id, p.pid.ID, p.pid.Epoch, []TxnPartition{{Topic: "kv", Partition: 0}}); err != nil || errs[0] != nil {
		p.t.Fatalf("add partition: %v %v", err, errs)
	}
	var recs []batch.Record
	for i := 0; i < len(kvs); i += 2 {
		recs = append(recs, batch.Record{Timestamp: newClock().Now().UnixMilli(), Key: []byte(kvs[i]), Value: []byte(kvs[i+1])})
	}
	raw, err := batch.Build(recs, batch.Options{Producer: &batch.Producer{ID: p.pid.ID, Epoch: p.pid.Epoch, BaseSequence: p.seq}, Transactional: true})
	if err != nil {
		p.t.Fatal(err)
	}
	if _, err := p.b.ProduceBatches(context.Background(), "kv", 0, [][]byte{raw}); err != nil {
		p.t.Fatalf("produce seq %d: %v", p.seq, err)
	}
	p.seq += int32(len(recs))
}

func (p *kvTxn) end(commit bool) {
	p.t.Helper()
	if err := p.b.EndTxn(p.id, p.pid.ID, p.pid.Epoch, commit); err != nil {
		p.t.Fatalf("end txn: %v", err)
	}
}

// committedKV reads kv/0 through the native Fetch (read_committed): the
// latest value of each key, and how many records it saw.
func committedKV(t *testing.T, b *Broker) map[string]string {
	t.Helper()
	out := map[string]string{}
	for off := int64(0); ; {
		res, err := b.Fetch(context.Background(), "kv", 0, off, FetchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Next < 0 {
			return out
		}
		if err := eachRecord(res.Batches, func(r batch.Record) bool {
			if r.Offset >= off {
				out[string(r.Key)] = string(r.Value)
			}
			return true
		}); err != nil {
			t.Fatal(err)
		}
		off = res.Next
	}
}

// rawValues reads kv/0 as read_uncommitted does: every data record.
func rawValues(t *testing.T, b *Broker) map[string][]string {
	t.Helper()
	_, p, err := b.streams.partition("kv", 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for off := p.log.LogStartOffset(); off < p.log.HighWatermark(); {
		data, err := p.log.Read(off, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) == 0 {
			break
		}
		for len(data) > 0 {
			h, _ := batch.ParseHeader(data)
			if !h.Control() {
				for r, err := range batch.Records(data[:h.Size()]) {
					if err != nil {
						t.Fatal(err)
					}
					out[string(r.Key)] = append(out[string(r.Key)], string(r.Value))
				}
			}
			data, off = data[h.Size():], h.NextOffset()
		}
	}
	return out
}

// TestCompactionTransactions: on a compacted topic with committed,
// aborted and open transactions, the cleaner keeps what read_committed
// sees (the latest committed value per key) and the open transaction,
// removes the aborted records (read_uncommitted no longer sees them),
// and, once delete.retention.ms is over, the markers of transactions with
// nothing left and their aborted-index entries. After a restart with the
// producer and transaction snapshots gone (both rebuilt from the cleaned
// log), the last stable offset is the open transaction's and the aborting
// producer goes on with its next sequence.
func TestCompactionTransactions(t *testing.T) {
	fsys, c := vfs.NewMem(), newClock()
	b := openCompactionBroker(t, fsys, c)
	defer func() { b.Close() }()
	if _, err := b.CreateTopic(TopicSettings{Name: "kv", CleanupPolicy: "compact", DeleteRetention: time.Minute}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	plain := func(k, v string) {
		t.Helper()
		if _, err := b.Produce(ctx, "kv", []ProduceRecord{{Key: []byte(k), Value: []byte(v), Partition: new(int32)}}, ProduceOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	a, ab := newKVTxn(t, b, "a"), newKVTxn(t, b, "ab")
	for i := range 10 {
		plain(fmt.Sprintf("k%d", i), "v0")
	}
	for round := range 3 {
		a.produce("k0", fmt.Sprintf("a%d", round), "k1", fmt.Sprintf("a%d", round))
		ab.produce("k0", "aborted", "k2", "aborted")
		a.end(true)
		ab.end(false)
		for i := range 60 { // fill sealed segments
			plain(fmt.Sprintf("f%d", i%20), fmt.Sprintf("%d-%d", round, i))
		}
	}
	ab.produce("k3", "aborted") // the aborting producer's last batch
	ab.end(false)
	for i := range 60 {
		plain(fmt.Sprintf("g%d", i), "x")
	}
	a.produce("k4", "open") // stays open
	for i := range 60 {
		plain(fmt.Sprintf("h%d", i), "x")
	}
	before := committedKV(t, b)
	if before["k0"] != "a2" || before["k4"] != "v0" {
		t.Fatalf("read_committed before cleaning: k0=%q k4=%q", before["k0"], before["k4"])
	}
	check := func(when string) {
		t.Helper()
		if got := committedKV(t, b); !maps.Equal(got, before) {
			t.Fatalf("%s: read_committed sees %v, saw %v before cleaning", when, got, before)
		}
		raw := rawValues(t, b)
		for k, vs := range raw {
			for _, v := range vs {
				if v == "aborted" {
					t.Fatalf("%s: read_uncommitted still sees an aborted record of %s", when, k)
				}
			}
		}
		if vs := raw["k4"]; len(vs) != 2 || vs[1] != "open" {
			t.Fatalf("%s: k4 holds %v, want v0 and the open transaction's record", when, vs)
		}
		if vs := raw["k0"]; len(vs) != 1 || vs[0] != "a2" {
			t.Fatalf("%s: k0 holds %v, want the latest committed a2 alone", when, vs)
		}
	}
	if err := b.CleanCompacted(nil); err != nil {
		t.Fatal(err)
	}
	check("after the first clean")
	_, p, _ := b.streams.partition("kv", 0)
	if n := len(p.txn.abortedIn(0, p.log.HighWatermark())); n != 4 {
		t.Fatalf("%d aborted-index entries before the horizon, want 4", n)
	}
	c.Advance(2 * time.Minute)
	plain("g0", "y") // a dirty byte, so passes run
	b.CleanCompacted(nil)
	_, tot := b.CompactionStats()
	if tot.AbortedRemoved != 7 || tot.MarkersRemoved == 0 {
		t.Fatalf("totals %+v: want 7 aborted records and some markers removed", tot)
	}
	check("after the horizon")
	// Only the last abort marker is left (its batch is the producer's
	// last, kept empty): so is its index entry alone.
	if got := p.txn.abortedIn(0, p.log.HighWatermark()); len(got) != 1 {
		t.Fatalf("aborted index %+v, want the last transaction's entry alone", got)
	}
	b.Close()
	for _, f := range []string{"producers.snapshot", txnSnapshotFile} {
		if err := fsys.Remove("/data/topics/1-kv/0/" + f); err != nil {
			t.Fatal(err)
		}
	}
	b = openCompactionBroker(t, fsys, c)
	check("after a restart without snapshots")
	_, p, _ = b.streams.partition("kv", 0)
	if st := partitionState(p); st.LastStableOffset >= st.HighWatermark {
		t.Fatalf("after the restart: %+v, want the LSO held by the open transaction", st)
	}
	// The aborting producer's sequence survived in its last (emptied) batch.
	ab.b = b
	ab.produce("k5", "after")
	ab.end(true)
	a.b = b
	a.end(true)
	got := committedKV(t, b)
	if got["k5"] != "after" || got["k4"] != "open" {
		t.Fatalf("after the restart: k5=%q k4=%q", got["k5"], got["k4"])
	}
}
