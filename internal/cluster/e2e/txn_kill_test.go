package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/kgotest"
	"github.com/sluice-mq/sluice/internal/testproc"
)

// TestTransactionsSurviveControllerKills: three nodes, a topic of three partitions on all
// of them, and a franz-go transactional producer running transactions of six records (two
// per partition), every third one aborted, while the controller — the transaction
// coordinator — is SIGKILLed and restarted SLUICE_CLUSTER_KILLS times (CI: 2). A
// transaction whose EndTxn failed is of unknown outcome; the producer then starts over
// with a new client under the same transactional id, which aborts or completes what was
// left. The checker, with a read_committed consumer: every committed transaction's six
// records are there exactly once, no aborted transaction's record is, and a transaction of
// unknown outcome shows all six records or none.
func TestTransactionsSurviveControllerKills(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three sluice processes")
	}
	kills := envInt("SLUICE_CLUSTER_KILLS", 2)
	c := startCluster(t, 3)
	var gone []*testproc.Proc
	c.keepLogs(&gone)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(30+kills*15)*time.Second)
	defer cancel()
	adm := kadm.NewClient(c.client())
	const topic = "txns"
	createTopic(ctx, t, adm, topic, 3, 3)

	type outcome int
	const (
		committed outcome = iota
		aborted
		unknown
	)
	outcomes := map[int]outcome{}
	newProducer := func() *kgo.Client {
		return c.client(kgo.TransactionalID("e2e"), kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(20*time.Second))
	}
	p := newProducer()
	stop := make(chan struct{})
	done := make(chan struct{})
	restarts := 0
	go func() {
		defer close(done)
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			commit := n%3 != 2
			prefix := "t"
			if !commit {
				prefix = "a"
			}
			err := p.BeginTransaction()
			for i := 0; i < 6 && err == nil; i++ {
				r := &kgo.Record{Partition: int32(i % 3), Value: fmt.Appendf(nil, "%s%d-%d", prefix, n, i)}
				err = p.ProduceSync(ctx, r).FirstErr()
			}
			if err == nil {
				err = p.EndTransaction(ctx, kgo.TransactionEndTry(commit))
				switch {
				case err == nil && commit:
					outcomes[n] = committed
				case err == nil:
					outcomes[n] = aborted
				default:
					outcomes[n] = unknown
				}
			} else {
				outcomes[n] = unknown // some records may be written: the next client aborts them
			}
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				// A new instance under the same id fences this one and ends what it left.
				p.Close()
				p = newProducer()
				restarts++
			}
		}
	}()
	for round := range kills {
		time.Sleep(3 * time.Second)
		ctl := c.controller(ctx)
		t.Logf("round %d: killing node %d (the controller)", round, ctl)
		c.kill(ctl)
		time.Sleep(2 * time.Second)
		gone = append(gone, c.procs[ctl-1])
		c.start(ctl)
		c.procs[ctl-1].Addr("kafka")
	}
	time.Sleep(3 * time.Second)
	close(stop)
	<-done
	if ctx.Err() != nil {
		t.Fatalf("ran out of time: %v", ctx.Err())
	}
	// The producer's last transaction ended (or was abandoned): a new instance ends it.
	p.Close()
	final := newProducer()
	if err := final.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := final.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Logf("final abort: %v", err)
	}

	seen := map[string]int{}
	for _, v := range readCommittedAll(ctx, t, c, topic) {
		seen[v]++
	}
	counts := map[outcome]int{}
	for n, o := range outcomes {
		counts[o]++
		prefix := "t"
		if n%3 == 2 {
			prefix = "a"
		}
		present := 0
		for i := range 6 {
			k := fmt.Sprintf("%s%d-%d", prefix, n, i)
			switch seen[k] {
			case 0:
			case 1:
				present++
			default:
				t.Fatalf("%s seen %d times", k, seen[k])
			}
		}
		switch {
		case o == committed && present != 6:
			t.Fatalf("committed transaction %d: %d of its 6 records visible", n, present)
		case o == aborted && present != 0:
			t.Fatalf("aborted transaction %d: %d of its records visible", n, present)
		case present != 0 && present != 6:
			t.Fatalf("transaction %d of unknown outcome: %d of its 6 records visible (half a transaction)", n, present)
		}
	}
	for k := range seen {
		if strings.HasPrefix(k, "a") {
			t.Fatalf("aborted record %s visible", k)
		}
	}
	t.Logf("%d transactions committed, %d aborted, %d of unknown outcome; %d producer restarts",
		counts[committed], counts[aborted], counts[unknown], restarts)
	if counts[committed] == 0 {
		t.Fatal("no transaction committed")
	}
	checkReplicasAgree(ctx, t, c, topic, 3)
}

// readCommittedAll reads topic from the start with read_committed until three polls in a
// row bring nothing (kgotest.DrainValues).
func readCommittedAll(ctx context.Context, t *testing.T, c *cluster, topic string) []string {
	t.Helper()
	cl := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	out, err := kgotest.DrainValues(ctx, cl, time.Second)
	if err != nil {
		t.Fatalf("reading %s back: %v (after %d records)", topic, err, len(out))
	}
	return out
}
