package node_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/kgotest"
	"github.com/sluice-mq/sluice/internal/node"
	"github.com/sluice-mq/sluice/internal/server"
)

// freeAddrs reserves n loopback ports (listened on, then closed: a moment's race with
// other tests, as every test that needs ports known in advance has).
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l.Addr().String())
		l.Close()
	}
	return out
}

// startCluster runs three nodes of a cluster in this process, each with its own data
// directory, Raft transport and Kafka listener, and returns their Kafka addresses.
func startCluster(t *testing.T) []string {
	t.Helper()
	raft, kafka := freeAddrs(t, 3), freeAddrs(t, 3)
	var peers []string
	for i, a := range raft {
		peers = append(peers, fmt.Sprintf("%d=%s", i+1, a))
	}
	// Started together: a node's Start waits for the metadata group, which needs a quorum.
	errs := make(chan error, 3)
	for i := range 3 {
		cfg := server.Defaults()
		cfg.DataDir, cfg.HTTPAddr, cfg.KafkaAddr, cfg.SQSAddr = t.TempDir(), "127.0.0.1:0", kafka[i], ""
		cfg.Fsync, cfg.NodeID, cfg.ClusterAddr, cfg.ClusterPeers = "never", uint64(i+1), raft[i], strings.Join(peers, ",")
		cfg.ClusterTick = 10 * time.Millisecond
		srv, err := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), "nodetest")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(func() {
			cancel()
			_ = srv.Wait(ctx)
		})
		go func() { errs <- srv.Start(ctx, node.Setup(node.Options{})) }()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	return kafka
}

// readCommitted reads topic from the start with read_committed until three polls in a row
// bring nothing (kgotest.DrainValues).
func readCommitted(t *testing.T, seeds []string, topic string) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	out, err := kgotest.DrainValues(context.Background(), cl, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestClusterTransactionsFranz: franz-go's transactional producer and a read_committed
// consumer against a three-node cluster: records of a committed transaction over three
// partitions (led by different nodes) are seen once each, an aborted one's never; and a
// consume-transform-produce session commits its group's offsets with its transaction
// only, not with an aborted one.
func TestClusterTransactionsFranz(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	seeds := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	for _, topic := range []string{"out", "in"} {
		for {
			r, err := adm.CreateTopic(ctx, 3, -1, nil, topic)
			if err == nil && (r.Err == nil || strings.Contains(r.Err.Error(), "TOPIC_ALREADY_EXISTS")) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("create %s: %v %v", topic, err, r.Err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// Every node advertises what a cluster serves of KIP-890: produce v11, EndTxn v4.
	vs, err := adm.ApiVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs.Sorted() {
		if produce, _ := v.KeyMaxVersion(0); produce != 11 {
			t.Fatalf("node %d advertises produce v%d, want v11", v.NodeID, produce)
		}
		if end, _ := v.KeyMaxVersion(26); end != 4 {
			t.Fatalf("node %d advertises EndTxn v%d, want v4", v.NodeID, end)
		}
	}

	p, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.TransactionalID("etl"), kgo.DefaultProduceTopic("out"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	txn := func(prefix string, commit bool) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range 6 {
			r := &kgo.Record{Partition: int32(i % 3), Value: fmt.Appendf(nil, "%s-%d", prefix, i)}
			if err := p.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("%s: produce: %v", prefix, err)
			}
		}
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("%s: end: %v", prefix, err)
		}
	}
	txn("c1", true)
	txn("a1", false)
	txn("c2", true)
	got := readCommitted(t, seeds, "out")
	seen := map[string]int{}
	for _, v := range got {
		seen[v]++
	}
	for _, prefix := range []string{"c1", "c2"} {
		for i := range 6 {
			if n := seen[fmt.Sprintf("%s-%d", prefix, i)]; n != 1 {
				t.Fatalf("%s-%d seen %d times: %v", prefix, i, n, got)
			}
		}
	}
	if len(got) != 12 {
		t.Fatalf("read_committed saw %d records, want the 12 committed: %v", len(got), got)
	}

	// Consume-transform-produce: "in" copied to "out" in transactions of the group "g".
	in, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("in"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	for i := range 9 {
		if err := in.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "in-%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	session := func(commit bool) int {
		s, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(seeds...), kgo.TransactionalID("ctp"),
			kgo.ConsumerGroup("g"), kgo.ConsumeTopics("in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DefaultProduceTopic("copies"),
			kgo.AllowAutoTopicCreation(), kgo.FetchMaxWait(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		n := 0
		for n < 9 && ctx.Err() == nil {
			if err := s.Begin(); err != nil {
				t.Fatal(err)
			}
			pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
			fs := s.PollFetches(pctx)
			pcancel()
			fs.EachRecord(func(r *kgo.Record) {
				n++
				s.Produce(ctx, &kgo.Record{Topic: "out", Partition: 0, Value: append([]byte("copy-"), r.Value...)}, nil)
			})
			if _, err := s.End(ctx, kgo.TransactionEndTry(commit)); err != nil {
				t.Fatalf("session end (commit %v): %v", commit, err)
			}
			if !commit && n > 0 {
				break
			}
		}
		return n
	}
	if n := session(false); n == 0 {
		t.Fatal("the aborted session read nothing")
	}
	if off, err := adm.FetchOffsets(ctx, "g"); err != nil || len(off.Sorted()) > 0 && off.Sorted()[0].At > 0 {
		t.Fatalf("after an aborted session the group committed %+v (%v)", off, err)
	}
	if n := session(true); n != 9 {
		t.Fatalf("the committed session copied %d records, want 9", n)
	}
	off, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, o := range off.Sorted() {
		total += o.At
	}
	if total != 9 {
		t.Fatalf("the group committed %d offsets in all, want 9: %+v", total, off.Sorted())
	}
	copies := 0
	for _, v := range readCommitted(t, seeds, "out") {
		if strings.HasPrefix(v, "copy-") {
			copies++
		}
	}
	if copies != 9 {
		t.Fatalf("read_committed saw %d copies, want the 9 of the committed session", copies)
	}
}
