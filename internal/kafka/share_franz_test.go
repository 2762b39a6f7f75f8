package kafka

import (
	"context"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/testproc"
)

// shareLedger is what franz-go share consumers did with each record.
type shareLedger struct {
	mu       sync.Mutex
	accepted map[int64]string // offset -> member that accepted it
	dups     []int64          // offsets accepted twice
	counts   map[int64]int32  // offset -> highest delivery count seen
	byMember map[string]int
}

func newShareLedger() *shareLedger {
	return &shareLedger{accepted: map[int64]string{}, counts: map[int64]int32{}, byMember: map[string]int{}}
}

func (l *shareLedger) n() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.accepted)
}

// startShareConsumer runs a franz-go v1.22.3 share consumer (KIP-932) that
// accepts every record except those decide says to release or reject.
func startShareConsumer(t *testing.T, addr, group, topic, name string, l *shareLedger,
	decide func(*kgo.Record) kgo.AckStatus) (stop func()) {
	return startShareConsumerWith(t, addr, group, topic, name, l, decide, 5)
}

func startShareConsumerMax(t *testing.T, addr, group, topic, name string, l *shareLedger, maxRecords int32) (stop func()) {
	return startShareConsumerWith(t, addr, group, topic, name, l, acceptAll, maxRecords)
}

func startShareConsumerWith(t *testing.T, addr, group, topic, name string, l *shareLedger,
	decide func(*kgo.Record) kgo.AckStatus, maxRecords int32) (stop func()) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ShareGroup(group), kgo.ConsumeTopics(topic),
		kgo.ShareMaxRecords(maxRecords), kgo.FetchMaxWait(200*time.Millisecond), kgo.MetadataMinAge(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				st := decide(r)
				r.Ack(st)
				l.mu.Lock()
				l.counts[r.Offset] = max(l.counts[r.Offset], r.DeliveryCount())
				if st == kgo.AckAccept {
					if _, ok := l.accepted[r.Offset]; ok {
						l.dups = append(l.dups, r.Offset)
					}
					l.accepted[r.Offset] = name
					l.byMember[name]++
				}
				l.mu.Unlock()
			})
		}
	}()
	return func() {
		cancel()
		<-done
		fctx, fcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer fcancel()
		if err := cl.FlushAcks(fctx); err != nil {
			t.Errorf("%s: flushing acks: %v", name, err)
		}
		cl.Close()
	}
}

func acceptAll(*kgo.Record) kgo.AckStatus { return kgo.AckAccept }

// releaseTens releases each tenth record on its first delivery.
func releaseTens(r *kgo.Record) kgo.AckStatus {
	if v, _ := strconv.Atoi(string(r.Value)); v%10 == 0 && r.DeliveryCount() == 1 {
		return kgo.AckRelease
	}
	return kgo.AckAccept
}

func produceNumbered(t *testing.T, addr, topic string, from, to int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		recs = append(recs, &kgo.Record{Value: []byte(strconv.Itoa(i))})
	}
	if err := cl.ProduceSync(testCtx(t, 20*time.Second), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func waitUntil(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !ok() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestShareFranz: two franz-go share consumers of one partition accept
// disjoint records, every record exactly once; released records come back
// with delivery count 2; a classic group reads every record meanwhile.
func TestShareFranz(t *testing.T) {
	n := startNode(t, t.TempDir())
	n.createTopic("fq", 1)
	if code := setShareConfig(t, n, "workers", "share.auto.offset.reset", "earliest"); code != 0 {
		t.Fatal(code)
	}
	const total = 200
	produceNumbered(t, n.addr, "fq", 0, total)
	l := newShareLedger()
	stopA := startShareConsumer(t, n.addr, "workers", "fq", "a", l, releaseTens)
	stopB := startShareConsumer(t, n.addr, "workers", "fq", "b", l, releaseTens)
	classic := n.client(kgo.ConsumeTopics("fq"), kgo.ConsumerGroup("loggers"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer classic.Close()
	seen := 0
	ctx := testCtx(t, 30*time.Second)
	for seen < total && ctx.Err() == nil {
		seen += len(classic.PollFetches(ctx).Records())
	}
	waitUntil(t, 30*time.Second, "every record accepted", func() bool { return l.n() == total })
	stopA()
	stopB()
	if seen != total {
		t.Fatalf("classic group saw %d of %d", seen, total)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.dups) > 0 {
		t.Fatalf("records accepted twice: %v", l.dups)
	}
	if l.byMember["a"] == 0 || l.byMember["b"] == 0 {
		t.Fatalf("one member got everything: %v", l.byMember)
	}
	for off := int64(0); off < total; off += 10 {
		if l.counts[off] < 2 {
			t.Fatalf("released record %d accepted with delivery count %d, want 2", off, l.counts[off])
		}
	}
}

// TestShareKill: the real binary, kill -9 between share consumers: records
// a franz-go share consumer accepted are never delivered again; records a
// member held acquired but had not acknowledged are, with their delivery
// count, once their lock (1 s here) runs out.
func TestShareKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := testproc.Build(t, t.TempDir())
	dir := t.TempDir()
	var proc *testproc.Proc
	start := func() *node {
		proc = testproc.Serve(t, bin, "--data-dir", dir, "--http-addr", "127.0.0.1:0", "--kafka-addr", "127.0.0.1:0",
			"--sqs-addr", "", "--fsync", "always")
		return &node{t: t, addr: proc.Addr("kafka")}
	}
	n := start()
	n.createTopic("kq", 1)
	if code := setShareConfig(t, n, "kw", "share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", "1000"); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	const total = 100
	produceNumbered(t, n.addr, "kq", 0, 30)
	l := newShareLedger()
	stop := startShareConsumer(t, n.addr, "kw", "kq", "first", l, acceptAll)
	waitUntil(t, 20*time.Second, "30 records accepted", func() bool { return l.n() == 30 })
	stop()
	first := l.n()
	// Produced after the first consumer left, so some are left to hold.
	produceNumbered(t, n.addr, "kq", 30, total)

	m := n.shareMember(t, "kw", "holder", "kq")
	held := acquired(m.fetch(20))
	if len(held) == 0 {
		t.Fatal("nothing left to hold")
	}
	proc.Kill()

	n = start()
	stop = startShareConsumer(t, n.addr, "kw", "kq", "after", l, acceptAll)
	waitUntil(t, 30*time.Second, "every record accepted", func() bool { return l.n() == total })
	stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.dups) > 0 {
		t.Fatalf("accepted records delivered again after kill -9: %v", l.dups)
	}
	for off := range held {
		if l.counts[off] < 2 {
			t.Fatalf("held record %d redelivered with count %d, want 2+", off, l.counts[off])
		}
	}
	t.Logf("%d accepted before, %d held at the kill, %d after", first, len(held), l.byMember["after"])
}

// TestShareThroughput measures franz-go share consumers draining a
// backlog: SLUICE_SHARE_RECORDS=N (skipped without), two consumers on one
// partition, every record accepted, every acknowledgement synced before it
// is answered (SyncAlways, sluice's default).
func TestShareThroughput(t *testing.T) {
	total, err := strconv.Atoi(os.Getenv("SLUICE_SHARE_RECORDS"))
	if err != nil || total <= 0 {
		t.Skip("set SLUICE_SHARE_RECORDS=N to measure")
	}
	n := startNodeSync(t, t.TempDir(), broker.SyncPolicy{Mode: broker.SyncAlways})
	n.createTopic("tp", 1)
	setShareConfig(t, n, "bench", "share.auto.offset.reset", "earliest")
	for i := 0; i < total; i += 5000 {
		produceNumbered(t, n.addr, "tp", i, min(i+5000, total))
	}
	l := newShareLedger()
	start := time.Now()
	stopA := startShareConsumerMax(t, n.addr, "bench", "tp", "a", l, 500)
	stopB := startShareConsumerMax(t, n.addr, "bench", "tp", "b", l, 500)
	waitUntil(t, 5*time.Minute, "every record accepted", func() bool { return l.n() == total })
	el := time.Since(start)
	stopA()
	stopB()
	t.Logf("%d records accepted by 2 share consumers in %v: %.0f records/s (dups %d, split %v)",
		total, el.Round(time.Millisecond), float64(total)/el.Seconds(), len(l.dups), l.byMember)
}
