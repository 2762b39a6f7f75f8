package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestSubscriptionLeaderKilledUnderLoad: three nodes, a topic of one partition replicated
// on all three, a subscription of it created through the CLI (in the catalog: every node
// knows it), an idempotent acks=all franz-go producer, and an aws-sdk-go-v2 consumer of
// the subscription (its escaped name, "<topic>%2F<subscription>") speaking to one node
// only: its receives and deletes are forwarded to the partition's leader, where the
// subscription's cursor events are entries of the partition's Raft group. The partition's
// leader is SIGKILLed and restarted, again and again. Checked: every acknowledged record
// is delivered, none is delivered by a receive that started after its DeleteMessage was
// answered (an ack survives every failover), and no record is delivered more than once
// per failover beyond its first delivery. SLUICE_CLUSTER_KILLS sets the rounds (CI: 3).
// On main's code the subscription was local to the node that created it: the other nodes
// answered QueueDoesNotExist and a failover lost its leases.
func TestSubscriptionLeaderKilledUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three sluice processes")
	}
	kills := envInt("SLUICE_CLUSTER_KILLS", 3)
	began := time.Now()
	c := startCluster(t, 3)
	for i := range c.procs {
		c.procs[i].Addr("sqs")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(90+kills*25)*time.Second)
	defer cancel()
	adm := kadm.NewClient(c.client())
	createTopic(ctx, t, adm, "events", 1, 3)
	const visibility = 5 // seconds: longer than a failover, so a delete is never late
	first := 0
	for first == 0 && ctx.Err() == nil {
		first = c.leaderOf(ctx, adm, "events", 0)
		time.Sleep(50 * time.Millisecond)
	}
	for {
		out, err := c.cliErr(first, "topic", "subscription", "create", "events", "audit", "--from-earliest",
			"--visibility-timeout", "5s")
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("create subscription: %v: %s", err, out)
		}
		t.Logf("create subscription: %v: %s; retrying", err, strings.TrimSpace(out))
		time.Sleep(200 * time.Millisecond)
	}
	via := first%3 + 1 // another node than the first leader: forwarding at work from the start
	cl := c.sqsClient(ctx, t, via)
	qurl := "http://" + c.sqs[via-1] + "/000000000000/events%2Faudit"
	t.Logf("after %v: partition's first leader: node %d; consumer through node %d (%s)", time.Since(began), first, via, qurl)

	load := startKafkaLoad(ctx, c, "events")
	ck := newQueueChecker()
	consumeDone := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); ck.consume(ctx, cl, qurl, visibility, consumeDone) }()
	waitReceived := func(n int, what string) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			ck.mu.Lock()
			got := len(ck.received)
			ck.mu.Unlock()
			if got >= n {
				return
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				t.Fatalf("%s: %d records received, want %d (receive errors %d, delete errors %d)", what, got, n,
					ck.recvErr.Load(), ck.delErr.Load())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitReceived(20, "before the first kill")
	for round := range kills {
		time.Sleep(2 * time.Second)
		leader := 0
		for leader == 0 && ctx.Err() == nil {
			leader = c.leaderOf(ctx, adm, "events", 0)
		}
		ck.mu.Lock()
		before := len(ck.received)
		ck.mu.Unlock()
		c.kill(leader)
		killed := time.Now()
		if leader == via {
			time.Sleep(500 * time.Millisecond)
			c.start(leader)
			c.procs[leader-1].Addr("sqs")
		}
		waitReceived(before+10, fmt.Sprintf("round %d, after killing node %d", round, leader))
		t.Logf("round %d: killed node %d (the partition's leader; the consumer's node: %v); 10 more records received after %v",
			round, leader, leader == via, time.Since(killed))
		if leader != via {
			time.Sleep(500 * time.Millisecond)
			c.start(leader)
			c.procs[leader-1].Addr("sqs")
		}
	}
	acked := load.stop()[0]
	ck.mu.Lock()
	for _, v := range acked {
		ck.acked[v] = true
	}
	ck.sent.Store(int64(len(acked)))
	ck.mu.Unlock()
	t.Logf("after %v: draining", time.Since(began))
	// Drain: every acknowledged record received, then a visibility timeout and then some,
	// so that a record whose delete's answer was lost (acked or not) has had its chance to
	// come back and be checked. (Waiting for every delete to be answered would wait for
	// ever on one acked whose answer was lost.)
	deadline := time.Now().Add(60 * time.Second)
	for ctx.Err() == nil && time.Now().Before(deadline) && !ck.allReceived() {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Duration(visibility)*time.Second + 2*time.Second)
	close(consumeDone)
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("ran out of time: %v", ctx.Err())
	}
	t.Logf("after %v: drained", time.Since(began))
	ck.report(t, nil)
	ck.mu.Lock()
	defer ck.mu.Unlock()
	for n, k := range ck.received {
		if k > 1+kills {
			t.Errorf("record %d delivered %d times over %d failovers", n, k, kills)
		}
	}
}

// allReceived: every acknowledged record was delivered at least once.
func (ck *queueChecker) allReceived() bool {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	for n := range ck.acked {
		if ck.received[n] == 0 {
			return false
		}
	}
	return true
}
