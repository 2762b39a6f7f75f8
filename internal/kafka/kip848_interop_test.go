package kafka

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/broker"
)

// kip848Config is the coordinator's KIP-848 settings in the interop tests:
// a short heartbeat interval so reconciliation steps take a fraction of a
// second (each waits for the next heartbeat of the member that must act).
var kip848Config = broker.ConsumerGroupConfig{HeartbeatInterval: 200 * time.Millisecond, SessionTimeout: 6 * time.Second}

// seenRecords collects what consumers received, by partition and offset.
type seenRecords struct {
	mu    sync.Mutex
	count map[string]int // "partition/offset" -> deliveries
	dups  int
}

func (s *seenRecords) add(p int32, off int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := fmt.Sprintf("%d/%d", p, off)
	s.count[k]++
	if s.count[k] > 1 {
		s.dups++
	}
}

func (s *seenRecords) unique() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.count)
}

// franzMember is one kgo consumer of the group, polling in a goroutine.
type franzMember struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

func startFranzMember(t *testing.T, n *node, group, topic string, seen *seenRecords) *franzMember {
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.AutoCommitInterval(100*time.Millisecond), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.MetadataMinAge(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &franzMember{cl: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { seen.add(r.Partition, r.Offset) })
		}
	}()
	return m
}

// stop ends polling, commits what was polled and leaves the group.
func (m *franzMember) stop(t *testing.T) {
	m.cancel()
	<-m.done
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Logf("final commit: %v", err)
	}
	m.cl.Close()
}

// TestKIP848FranzGo: franz-go's KIP-848 consumer (kgo.ServerSideBalancer,
// ConsumerGroupHeartbeat v1) in a group of three over six partitions while
// records arrive and members leave and join: every record is consumed
// (none skipped), duplicates only from rebalances, the offsets committed
// at the end are the log ends, and a new member resumes from them.
func TestKIP848FranzGo(t *testing.T) {
	n := startConsumerNode(t, nil, kip848Config)
	n.createTopic("k848", 6)
	const total = 3000
	prod := n.client(kgo.DefaultProduceTopic("k848"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	ctx := testCtx(t, 60*time.Second)
	produced := make(chan error, 1)
	go func() { // 30 batches over ~3 s, so members change while records flow
		for i := range total / 100 {
			var rs []*kgo.Record
			for j := range 100 {
				rs = append(rs, &kgo.Record{Value: fmt.Appendf(nil, "r%d", i*100+j)})
			}
			if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				produced <- err
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		produced <- nil
	}()
	seen := &seenRecords{count: map[string]int{}}
	members := []*franzMember{}
	for range 3 {
		members = append(members, startFranzMember(t, n, "g848", "k848", seen))
	}
	// Churn: one leaves, one joins, every 700 ms, four times.
	for range 4 {
		time.Sleep(700 * time.Millisecond)
		members[0].stop(t)
		members = append(members[1:], startFranzMember(t, n, "g848", "k848", seen))
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() bool { return seen.unique() == total }, func() string {
		return fmt.Sprintf("%d of %d records consumed", seen.unique(), total)
	})
	// It was the KIP-848 protocol: a consumer group, three members, each
	// with two partitions once it settles.
	waitFor(t, 10*time.Second, func() bool {
		info, _ := n.b.DescribeGroup("g848")
		if info.Type != broker.GroupTypeConsumer || len(info.Members) != 3 || info.State != broker.GroupStable {
			return false
		}
		for _, m := range info.Members {
			if len(m.Partitions) != 1 || len(m.Partitions[0].Partitions) != 2 {
				return false
			}
		}
		return true
	}, func() string { info, _ := n.b.DescribeGroup("g848"); return fmt.Sprintf("group: %+v", info) })
	for _, m := range members {
		m.stop(t)
	}
	for p := range int32(6) {
		if c, ok := n.b.FetchOffset("g848", "k848", p); !ok || c.Offset != total/6 {
			t.Errorf("partition %d: committed %+v %v, want %d", p, c, ok, total/6)
		}
	}
	// Resume: 60 more records reach a new member, and nothing older.
	if err := prod.ProduceSync(ctx, recordsN(60)...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	dupsBefore := seen.dups
	m := startFranzMember(t, n, "g848", "k848", seen)
	waitFor(t, 20*time.Second, func() bool { return seen.unique() == total+60 }, func() string {
		return fmt.Sprintf("%d of %d records after resuming", seen.unique(), total+60)
	})
	m.stop(t)
	if seen.dups != dupsBefore {
		t.Errorf("the resumed member got %d records again", seen.dups-dupsBefore)
	}
	t.Logf("%d records, %d delivered twice (rebalances)", total, dupsBefore)
}

func recordsN(n int) []*kgo.Record {
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Value: fmt.Appendf(nil, "more%d", i)})
	}
	return rs
}

// waitFor polls cond every 20 ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, cond func() bool, what func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", what())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
