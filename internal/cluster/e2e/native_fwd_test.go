package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-mq/sluice/client"
)

const nativeToken = "sl_e2e-native-token"

// TestNativeThroughFollower: three nodes with --auth-file, one queue on all of them, and
// the Go client (client/, bearer token) speaking only to a node that does not lead the
// queue: a producer sending, a Consume stream receiving, and an Ack of every delivery,
// all forwarded inside the cluster to the leader, which is killed with SIGKILL and
// restarted, SLUICE_CLUSTER_KILLS times (CI: 2). Before each kill the clients move to a
// node that does not lead. It checks that the first calls are answered while another node
// leads (forwarded: before forwarding they answered NOT_LEADER) — Produce and Fetch through
// every node, then Send, a long-polled Receive, Extend, Nack and AckBatch through the
// client's node — that every acknowledged
// send is delivered, and that no message is delivered on a stream opened after its Ack
// was answered. The client retries what answers unavailable (a NOT_LEADER during an
// election, a forward cut by the kill).
func TestNativeThroughFollower(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three sluice processes")
	}
	kills := envInt("SLUICE_CLUSTER_KILLS", 2)
	users := filepath.Join(t.TempDir(), "users.yaml")
	file := strings.Replace(usersFile, "access_keys:", "tokens: ["+nativeToken+"]\n    access_keys:", 1)
	if err := os.WriteFile(users, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, 3, "--auth-file", users)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(60+kills*25)*time.Second)
	defer cancel()
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()
	c.awaitRegistered(rctx, t, 3)
	const visibility = 5 * time.Second
	for {
		_, err := c.native(1).CreateQueue(rctx, "work", &client.QueueConfig{VisibilityTimeout: durationpb.New(visibility)})
		if err == nil {
			break
		}
		if rctx.Err() != nil {
			t.Fatalf("create queue: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	checkTopicAnyNode(rctx, t, c)
	leader := c.queueLeader(ctx, t, "work")
	var via atomic.Int32
	via.Store(int32(leader%3 + 1))
	var cur atomic.Pointer[client.Client]
	cur.Store(c.native(int(via.Load())))
	t.Logf("queue's leader: node %d; the client speaks to node %d", leader, via.Load())
	if _, err := cur.Load().Send(ctx, "work", []byte("probe")); err != nil {
		t.Fatalf("send through node %d while node %d leads: %v", via.Load(), leader, err)
	}
	checkQueueCalls(ctx, t, cur.Load(), int(via.Load()), leader)

	ck := &nativeChecker{acked: map[string]bool{}, ackedAt: map[string]time.Time{}, ackUnknown: map[string]bool{}, ackGaveUp: map[string]string{}, received: map[string]int{}}
	stop := make(chan struct{})
	var wg, produced sync.WaitGroup
	wg.Add(1)
	produced.Add(1)
	go func() { defer produced.Done(); ck.produce(ctx, &cur, stop) }()
	consumeDone := make(chan struct{})
	go func() { defer wg.Done(); ck.consume(ctx, &cur, consumeDone) }()

	var failovers []time.Duration
	for round := range kills {
		time.Sleep(2 * time.Second)
		leader := c.queueLeader(ctx, t, "work")
		if int(via.Load()) == leader {
			// Off the node about to be killed: a stream it serves itself would be cut at
			// the client (what is under test is a cut forward).
			via.Store(int32(leader%3 + 1))
			cur.Store(c.native(int(via.Load())))
			ck.restream()
			time.Sleep(300 * time.Millisecond)
		}
		c.kill(leader)
		killed := time.Now()
		for ck.lastSendStart.Load() < killed.UnixNano() && ctx.Err() == nil {
			if time.Since(killed) > 30*time.Second {
				t.Fatalf("no send answered through node %d 30 s after node %d was killed: %v", via.Load(), leader, ck.lastErr.Load())
			}
			time.Sleep(5 * time.Millisecond)
		}
		failovers = append(failovers, time.Since(killed))
		t.Logf("round %d: killed node %d (the leader); a send through node %d made after the kill answered after %v",
			round, leader, via.Load(), failovers[round].Round(time.Millisecond))
		time.Sleep(500 * time.Millisecond)
		c.start(leader)
		c.procs[leader-1].Addr("http")
	}
	time.Sleep(time.Second)
	close(stop)
	produced.Wait() // its last send answered: the drain waits for that one too
	drain := time.Now().Add(visibility + 30*time.Second)
	for !ck.drained() && time.Now().Before(drain) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	close(consumeDone)
	wg.Wait()
	if !ck.drained() {
		// What the queue holds, to tell a message still leased or visible from one gone.
		qctx, qcancel := context.WithTimeout(context.Background(), 10*time.Second)
		q, err := cur.Load().GetQueue(qctx, "work")
		t.Logf("not drained; the queue through node %d: %v (%v)", via.Load(), q.GetStats(), err)
		if pk, err := cur.Load().Peek(qctx, "work", 0, 20); err == nil {
			for _, m := range pk.GetMessages() {
				t.Logf("unfinished: %v", m)
			}
		} else {
			t.Logf("peek: %v", err)
		}
		qcancel()
	}
	ck.report(t, failovers)
}

// checkTopicAnyNode produces to a one-partition topic through every node (two of which
// do not lead it) and fetches it back through every node: all of it forwarded, none
// NOT_LEADER.
func checkTopicAnyNode(ctx context.Context, t *testing.T, c *cluster) {
	t.Helper()
	for {
		_, err := c.native(1).CreateTopic(ctx, "events", &client.TopicConfig{Partitions: 1})
		if err == nil || errors.Is(err, client.ErrTopicAlreadyExists) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("create topic: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var want []string
	for id := 1; id <= 3; id++ {
		v := fmt.Sprintf("through node %d", id)
		for {
			_, err := c.native(id).Produce(ctx, "events", []*client.ProduceRecord{{Value: []byte(v)}}, nil)
			if err == nil {
				break
			}
			// Only while the partition's first leader is elected.
			if ctx.Err() != nil || !retryable(err) {
				t.Fatalf("produce through node %d: %v", id, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		want = append(want, v)
	}
	checkPartlyWritten(ctx, t, c)
	for id := 1; id <= 3; id++ {
		res, err := c.native(id).Fetch(ctx, &client.FetchRequest{Topic: "events",
			Partitions: []*client.PartitionOffset{{Partition: 0, Offset: 0}}})
		if err != nil {
			t.Fatalf("fetch through node %d: %v", id, err)
		}
		var got []string
		for _, p := range res.GetPartitions() {
			if p.GetError() != nil {
				t.Fatalf("fetch through node %d: partition %d: %v", id, p.GetPartition(), p.GetError())
			}
			for _, r := range p.GetRecords() {
				got = append(got, string(r.GetValue()))
			}
		}
		if strings.Join(got, ";") != strings.Join(want, ";") {
			t.Errorf("fetch through node %d: %q, want %q", id, got, want)
		}
	}
}

// checkQueueCalls makes every kind of queue call once through node via while leader
// leads the queue: a long-polled Receive of the probe, Extend, Nack, Receive again and
// AckBatch, each forwarded.
func checkQueueCalls(ctx context.Context, t *testing.T, cl *client.Client, via, leader int) {
	t.Helper()
	fail := func(what string, err error) {
		t.Helper()
		t.Fatalf("%s through node %d while node %d leads: %v", what, via, leader, err)
	}
	msgs, err := cl.Receive(ctx, "work", client.Wait(time.Second))
	if err != nil || len(msgs) != 1 || string(msgs[0].GetBody()) != "probe" {
		fail(fmt.Sprintf("receive (%d messages)", len(msgs)), err)
	}
	if _, err := cl.Extend(ctx, "work", msgs[0].GetReceipt(), time.Minute); err != nil {
		fail("extend", err)
	}
	if err := cl.Nack(ctx, "work", msgs[0].GetReceipt(), 0, "again"); err != nil {
		fail("nack", err)
	}
	if msgs, err = cl.Receive(ctx, "work", client.Wait(time.Second)); err != nil || len(msgs) != 1 {
		fail(fmt.Sprintf("receive after the nack (%d messages)", len(msgs)), err)
	}
	errs, err := cl.AckBatch(ctx, "work", []string{msgs[0].GetReceipt()})
	if err == nil && errs[0] != nil {
		err = errs[0]
	}
	if err != nil {
		fail("ack batch", err)
	}
}

// checkPartlyWritten: a Produce to three partitions, each led by another node, through
// the leader of partition 0 writes that one and answers unavailable; it is not forwarded whole to
// another leader, which would write its own partition too (and, had leadership moved, the
// first one a second time).
func checkPartlyWritten(ctx context.Context, t *testing.T, c *cluster) {
	t.Helper()
	for {
		_, err := c.native(1).CreateTopic(ctx, "spread", &client.TopicConfig{Partitions: 3})
		if err == nil || errors.Is(err, client.ErrTopicAlreadyExists) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("create topic: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	leaders := c.spreadLeaders(ctx, t, "spread")
	via := leaders[0] // leads partition 0
	var recs []*client.ProduceRecord
	for p := range int32(3) {
		recs = append(recs, &client.ProduceRecord{Value: []byte("x"), Partition: &p})
	}
	_, err := c.native(via).Produce(ctx, "spread", recs, nil)
	if client.ReasonOf(err) != "NOT_LEADER" {
		t.Fatalf("produce to three partitions led by nodes %v, through node %d: %v, want NOT_LEADER", leaders, via, err)
	}
	time.Sleep(time.Second) // every replica applied what was committed
	total := int64(0)
	info, derr := c.native(via).DescribeTopic(ctx, "spread")
	if derr != nil {
		t.Fatal(derr)
	}
	for _, p := range info.GetPartitions() {
		total += p.GetHighWatermark()
	}
	if total != 1 {
		t.Errorf("the refused produce wrote %d records (high watermarks %v), want 1: node %d's own partition only",
			total, info.GetPartitions(), via)
	}
	checkReadsAcrossLeaders(ctx, t, c, via)
}

// native is a Go client of node id's HTTP listener, with the test user's token.
func (c *cluster) native(id int) *client.Client {
	return client.New("http://"+c.procs[id-1].Addr("http"), client.WithToken(nativeToken))
}

// nativeChecker keeps what the native clients were told.
type nativeChecker struct {
	mu            sync.Mutex
	acked         map[string]bool      // Send answered
	ackedAt       map[string]time.Time // Ack answered
	ackUnknown    map[string]bool      // an Ack cut by a failover, then RECEIPT_STALE: acked then, or expired
	ackGaveUp     map[string]string    // the answer of an Ack given up on (the message comes again)
	received      map[string]int
	violations    []string
	sendErrs      atomic.Int64
	ackErrs       atomic.Int64
	streams       atomic.Int64
	lastErr       atomic.Value
	lastSendStart atomic.Int64 // start of the latest answered send
	endStream     atomic.Pointer[context.CancelFunc]
}

// restream ends the current Consume stream; the consumer opens the next on the clients'
// current node.
func (ck *nativeChecker) restream() {
	if end := ck.endStream.Load(); end != nil {
		(*end)()
	}
}

// retryable: the answers a client retries on another attempt (an election, a cut
// forward, a refused connection to a node being restarted).
func retryable(err error) bool {
	var e *client.Error
	return !errors.As(err, &e) || e.Code == connect.CodeUnavailable || e.Code == connect.CodeDeadlineExceeded
}

func (ck *nativeChecker) produce(ctx context.Context, cur *atomic.Pointer[client.Client], stop <-chan struct{}) {
	for n := 0; ; n++ {
		body := "m" + strconv.Itoa(n)
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			default:
			}
			start := time.Now()
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			_, err := cur.Load().Send(cctx, "work", []byte(body))
			cancel()
			if err == nil {
				ck.mu.Lock()
				ck.acked[body] = true
				ck.mu.Unlock()
				ck.lastSendStart.Store(start.UnixNano())
				break
			}
			ck.sendErrs.Add(1)
			ck.lastErr.Store(fmt.Sprintf("send: %v", err))
			if !retryable(err) {
				ck.fail("send %s: %v, not retryable", body, err)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (ck *nativeChecker) consume(ctx context.Context, cur *atomic.Pointer[client.Client], done <-chan struct{}) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-done:
		case <-ctx.Done():
		}
		cancel()
	}()
	for sctx.Err() == nil {
		opened := time.Now()
		ck.streams.Add(1)
		cl := cur.Load()
		stream, end := context.WithCancel(sctx)
		ck.endStream.Store(&end)
		got := 0
		for m, err := range cl.Consume(stream, "work", client.MaxMessages(10)) {
			got++
			if err != nil {
				ck.lastErr.Store(fmt.Sprintf("consume: %v", err))
				// Canceled by restream or by the end of the test: not the server's answer.
				if stream.Err() == nil && !retryable(err) {
					ck.fail("consume: %v, not retryable", err)
				}
				break
			}
			body := string(m.GetBody())
			ck.mu.Lock()
			ck.received[body]++
			if at, ok := ck.ackedAt[body]; ok && at.Before(opened) {
				ck.violations = append(ck.violations, fmt.Sprintf("%s delivered on a stream opened %v after its ack was answered",
					body, opened.Sub(at)))
			}
			ck.mu.Unlock()
			ck.ack(sctx, cur, body, m.GetReceipt())
		}
		end()
		time.Sleep(20 * time.Millisecond)
	}
}

// ack acks one delivery through the clients' current node, retrying while the cluster
// fails over (the stream's node may be the killed leader, restarted on another HTTP
// port); a stale receipt (the visibility ran out) gives up: the message comes again.
func (ck *nativeChecker) ack(ctx context.Context, cur *atomic.Pointer[client.Client], body, receipt string) {
	for retried := false; ctx.Err() == nil; retried = true {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := cur.Load().Ack(cctx, "work", receipt) // any node: a receipt acks through any
		cancel()
		if err == nil {
			ck.mu.Lock()
			if _, ok := ck.ackedAt[body]; !ok {
				ck.ackedAt[body] = time.Now()
			}
			ck.mu.Unlock()
			return
		}
		ck.ackErrs.Add(1)
		if errors.Is(err, client.ErrReceiptStale) && retried {
			// "or it was acked" (docs/api.md): the cut attempt may have been committed.
			ck.mu.Lock()
			ck.ackUnknown[body] = true
			ck.mu.Unlock()
			return
		}
		if errors.Is(err, client.ErrReceiptStale) || !retryable(err) {
			ck.mu.Lock()
			ck.ackGaveUp[body] = fmt.Sprintf("%v (at %s)", err, time.Now().Format("15:04:05.000"))
			ck.mu.Unlock()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (ck *nativeChecker) fail(format string, args ...any) {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	ck.violations = append(ck.violations, fmt.Sprintf(format, args...))
}

func (ck *nativeChecker) drained() bool {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	for body := range ck.acked {
		if ck.received[body] == 0 {
			return false
		}
	}
	for body := range ck.received {
		if _, ok := ck.ackedAt[body]; !ok && !ck.ackUnknown[body] {
			return false
		}
	}
	return true
}

func (ck *nativeChecker) report(t *testing.T, failovers []time.Duration) {
	t.Helper()
	ck.mu.Lock()
	defer ck.mu.Unlock()
	redelivered := 0
	for body := range ck.acked {
		switch n := ck.received[body]; {
		case n == 0:
			t.Errorf("%s: send acknowledged, never delivered", body)
		case n > 1:
			redelivered++
		}
		if _, ok := ck.ackedAt[body]; !ok && ck.received[body] > 0 && !ck.ackUnknown[body] {
			t.Errorf("%s: delivered, never acked (the ack given up on: %s)", body, ck.ackGaveUp[body])
		}
	}
	for _, v := range ck.violations {
		t.Error(v)
	}
	t.Logf("%d sends acknowledged, %d acked (%d more cut, then stale), %d redelivered; %d streams; errors retried: %d sends, %d acks; failovers %v",
		len(ck.acked), len(ck.ackedAt), len(ck.ackUnknown), redelivered, ck.streams.Load(), ck.sendErrs.Load(), ck.ackErrs.Load(), failovers)
	if len(ck.acked) < 50 {
		t.Errorf("only %d sends acknowledged", len(ck.acked))
	}
}

// spreadLeaders waits until topic's three partitions are led by three different nodes
// (placement spreads them) and returns their leaders, by partition.
func (c *cluster) spreadLeaders(ctx context.Context, t *testing.T, topic string) []int {
	t.Helper()
	adm := kadm.NewClient(c.client(kgo.SASL(plain.Auth{User: "app", Pass: "app-pw"}.AsMechanism())))
	defer adm.Close()
	var leaders []int
	for len(leaders) < 3 {
		leaders = leaders[:0]
		for p := range int32(3) {
			if l := c.leaderOf(ctx, adm, topic, p); l != 0 && !containsInt(leaders, l) {
				leaders = append(leaders, l)
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("no three leaders of %s's partitions: %v", topic, leaders)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return leaders
}
