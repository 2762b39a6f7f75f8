package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/cluster/faultproxy"
)

// electionTimeout is the longest Raft election timeout at the default --cluster-tick
// (50 ms): raft randomises 10 to 19 ticks.
const electionTimeout = 19 * 50 * time.Millisecond

// TestLeaderPartitionedAway: three nodes behind fault proxies (one per directed link), a
// topic of one partition replicated on all three, and one writer per node sending
// acks=all produce requests straight to its node (never routed by metadata, so the old
// leader is asked to write all through the partition). The leader of the partition is
// cut off from both followers, the links are healed, then every node is stopped and its
// partition log read from its data directory. It checks:
//
//   - the isolated leader acknowledges no request sent after the cut, and nothing at all
//     later than a few election timeouts after it, and stops naming itself leader;
//   - the two others elect a new leader that acknowledges writes during the partition;
//   - after healing, every node's log holds the same batches (the old leader's log
//     converged), every acknowledged record is there exactly once at the offset its
//     acknowledgement gave, and no term's records were acknowledged by two nodes.
//
// SLUICE_CLUSTER_PARTITION_SECS sets how long the partition lasts (CI: 5).
func TestLeaderPartitionedAway(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three sluice processes")
	}
	hold := time.Duration(envInt("SLUICE_CLUSTER_PARTITION_SECS", 5)) * time.Second
	c := startProxiedCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second+2*hold)
	defer cancel()
	adm := kadm.NewClient(c.client())
	const topic = "ledger"
	createTopic(ctx, t, adm, topic, 1, 3)
	old := waitLeader(ctx, t, c, topic, func(int) bool { return true })

	w := startWriters(ctx, t, c, topic)
	w.waitAcks(ctx, t, old, 20, time.Time{})

	c.isolate(old, faultproxy.Cut)
	cutAt := time.Now()
	t.Logf("node %d (leader of %s/0) cut off from both followers", old, topic)
	fresh := waitLeader(ctx, t, c, topic, func(id int) bool { return id != old })
	elected := time.Since(cutAt)
	w.waitAcks(ctx, t, fresh, 20, cutAt)
	t.Logf("node %d elected and acknowledging %v after the cut", fresh, time.Since(cutAt).Round(time.Millisecond))
	if rest := hold - time.Since(cutAt); rest > 0 {
		time.Sleep(rest)
	}
	stepped := c.leaderSeenBy(ctx, t, old, topic) != old
	c.isolate(old, faultproxy.Pass)
	healAt := time.Now()
	w.waitAcks(ctx, t, 0, 20, healAt) // any node: the leadership may move back to its preferred replica
	time.Sleep(time.Second)
	w.stop()

	t.Logf("new leader %v after the cut; %s", elected.Round(time.Millisecond), w.summary())
	if !stepped {
		t.Errorf("node %d still named itself leader of %s/0 after %v cut off", old, topic, hold)
	}
	if last := w.lastAck(old, cutAt, healAt); !last.IsZero() && last.Sub(cutAt) > 3*electionTimeout {
		t.Errorf("isolated node %d acknowledged a write %v after the cut: more than 3 election timeouts", old, last.Sub(cutAt))
	}
	minority := 0
	for _, a := range w.acked() {
		if a.node == old && a.sent.After(cutAt) && a.got.Before(healAt) {
			if minority++; minority <= 3 {
				t.Errorf("isolated node %d acknowledged %s, sent %v after the cut: it cannot have reached a quorum",
					old, a.value, a.sent.Sub(cutAt))
			}
		}
	}
	if minority > 3 {
		t.Errorf("isolated node %d acknowledged %d writes sent after the cut", old, minority)
	}
	waitCaughtUp(ctx, t, c, topic)
	for i := range c.procs {
		c.procs[i].Stop()
	}
	checkConverged(t, c, topic, w.acked())
}

// waitCaughtUp waits until every node's local log of topic/0 has the same high watermark
// (waitHighWatermarksMeet).
func waitCaughtUp(ctx context.Context, t *testing.T, c *cluster, topic string) {
	t.Helper()
	waitHighWatermarksMeet(ctx, t, c, topic, 1)
}

// waitLeader waits until every node but any isolated one agrees on one leader of
// topic/0 that ok accepts, and returns it.
func waitLeader(ctx context.Context, t *testing.T, c *cluster, topic string, ok func(int) bool) int {
	t.Helper()
	for ctx.Err() == nil {
		seen := map[int]int{}
		for id := range c.procs {
			seen[c.leaderSeenBy(ctx, t, id+1, topic)]++
		}
		for leader, n := range seen {
			if leader != 0 && ok(leader) && n >= 2 {
				return leader
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no leader of %s/0 agreed by two nodes: %v", topic, ctx.Err())
	return 0
}

// leaderSeenBy asks node id itself (a Metadata request to it, not routed) who leads
// topic/0; 0: nobody, or it did not answer.
func (c *cluster) leaderSeenBy(ctx context.Context, t *testing.T, id int, topic string) int {
	cl := c.nodeClient(t, id)
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(rctx, req)
	if err != nil {
		return 0
	}
	md := resp.(*kmsg.MetadataResponse)
	if len(md.Topics) != 1 || len(md.Topics[0].Partitions) != 1 || md.Topics[0].Partitions[0].ErrorCode != 0 {
		return 0
	}
	return int(max(md.Topics[0].Partitions[0].Leader, 0))
}

// nodeClient is a client whose only seed is node id: requests sent to its seed broker
// go to that node whatever Metadata says. One per node, closed with the test.
func (c *cluster) nodeClient(t *testing.T, id int) *kgo.Client {
	c.directMu.Lock()
	defer c.directMu.Unlock()
	if c.direct == nil {
		c.direct = map[int]*kgo.Client{}
	}
	if cl := c.direct[id]; cl != nil {
		return cl
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.kafka[id-1]), kgo.MaxVersions(kversion.V3_0_0()),
		kgo.RequestTimeoutOverhead(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	c.direct[id] = cl
	return cl
}

// ack is one acknowledged produce: which node answered it, the record's value, the
// offset it was given, when it was sent and answered.
type ack struct {
	node      int
	value     string
	offset    int64
	sent, got time.Time
}

// writers send one record at a time to each node, acks=all, each request straight to
// its node; a node that does not lead answers NOT_LEADER_OR_FOLLOWER and is asked again.
type writers struct {
	mu      sync.Mutex
	acks    []ack
	refused map[int]map[string]int // answered with an error code, by code name
	lost    map[int]int            // no answer (timeout, connection)
	quit    chan struct{}
	wg      sync.WaitGroup
}

func startWriters(ctx context.Context, t *testing.T, c *cluster, topic string) *writers {
	w := &writers{refused: map[int]map[string]int{}, lost: map[int]int{}, quit: make(chan struct{})}
	for id := 1; id <= len(c.procs); id++ {
		cl := c.nodeClient(t, id)
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for seq := 0; ; seq++ {
				select {
				case <-w.quit:
					return
				case <-ctx.Done():
					return
				default:
				}
				w.produce(ctx, t, cl, id, topic, fmt.Sprintf("n%d-%d", id, seq))
			}
		}()
	}
	return w
}

func (w *writers) produce(ctx context.Context, t *testing.T, cl *kgo.Client, id int, topic, value string) {
	b, err := batch.Build([]batch.Record{{Timestamp: time.Now().UnixMilli(), Value: []byte(value)}}, batch.Options{})
	if err != nil {
		t.Error(err)
		return
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 2000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = b
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	sent := time.Now()
	resp, err := cl.SeedBrokers()[0].Request(rctx, req)
	got := time.Now()
	var p kmsg.ProduceResponseTopicPartition
	if err == nil {
		p = resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	}
	w.mu.Lock()
	switch {
	case err != nil:
		w.lost[id]++
	case p.ErrorCode != 0:
		if w.refused[id] == nil {
			w.refused[id] = map[string]int{}
		}
		w.refused[id][kerr.ErrorForCode(p.ErrorCode).(*kerr.Error).Message]++
	default:
		w.acks = append(w.acks, ack{node: id, value: value, offset: p.BaseOffset, sent: sent, got: got})
	}
	w.mu.Unlock()
	if err == nil && p.ErrorCode != 0 {
		time.Sleep(10 * time.Millisecond) // a follower answers at once: do not spin
	}
}

// waitAcks waits until node id (0: any) has acknowledged n writes sent after since.
func (w *writers) waitAcks(ctx context.Context, t *testing.T, id, n int, since time.Time) {
	t.Helper()
	for ctx.Err() == nil {
		k := 0
		for _, a := range w.acked() {
			if (id == 0 || a.node == id) && a.sent.After(since) {
				k++
			}
		}
		if k >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("node %d acknowledged fewer than %d writes since %v (%s)", id, n, since.Format(time.StampMilli), w.summary())
}

// lastAck is when node id last acknowledged a write between from and to (zero: never).
func (w *writers) lastAck(id int, from, to time.Time) time.Time {
	var last time.Time
	for _, a := range w.acked() {
		if a.node == id && a.got.After(from) && a.got.Before(to) && a.got.After(last) {
			last = a.got
		}
	}
	return last
}

func (w *writers) acked() []ack {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]ack(nil), w.acks...)
}

func (w *writers) stop() {
	close(w.quit)
	w.wg.Wait()
}

func (w *writers) summary() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	per := map[int]int{}
	for _, a := range w.acks {
		per[a.node]++
	}
	return fmt.Sprintf("acknowledged per node %v, refused %v, unanswered %v", per, w.refused, w.lost)
}
