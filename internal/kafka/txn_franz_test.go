package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/kgotest"
)

// readAll consumes topic from the start with the isolation level until
// three polls in a row bring nothing (kgotest.DrainValues), and returns the
// values.
func readAll(t *testing.T, n *node, topic string, level kgo.IsolationLevel) []string {
	t.Helper()
	cl := n.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(level), kgo.FetchMaxWait(100*time.Millisecond))
	defer cl.Close()
	out, err := kgotest.DrainValues(context.Background(), cl, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTxnCommitAbortVisibility: a committed transaction's records are
// seen by read_committed consumers, an aborted one's are not, and
// read_uncommitted consumers see both.
func TestTxnCommitAbortVisibility(t *testing.T) {
	n := startNode(t, "")
	n.createTopic("tx", 3)
	ctx := testCtx(t, 30*time.Second)
	p := n.client(kgo.TransactionalID("vis"), kgo.DefaultProduceTopic("tx"))
	produce := func(prefix string, k int, commit bool) {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range k {
			if err := p.ProduceSync(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: fmt.Appendf(nil, "%s-%d", prefix, i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	produce("c1", 10, true)
	produce("a1", 7, false)
	produce("c2", 5, true)
	committed := readAll(t, n, "tx", kgo.ReadCommitted())
	if len(committed) != 15 {
		t.Fatalf("read_committed saw %d records, want the 15 committed: %v", len(committed), committed)
	}
	for _, v := range committed {
		if v[0] == 'a' {
			t.Fatalf("read_committed saw aborted record %s", v)
		}
	}
	if all := readAll(t, n, "tx", kgo.ReadUncommitted()); len(all) != 22 {
		t.Fatalf("read_uncommitted saw %d records, want 22", len(all))
	}
}

// TestTxnOpenInvisible: records of an open transaction stay below no
// read_committed reader's reach (ListOffsets answers the LSO), and become
// visible at commit.
func TestTxnOpenInvisible(t *testing.T) {
	n := startNode(t, "")
	n.createTopic("open", 1)
	ctx := testCtx(t, 30*time.Second)
	plain := n.client(kgo.DefaultProduceTopic("open"))
	if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	p := n.client(kgo.TransactionalID("open"), kgo.DefaultProduceTopic("open"))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("inside")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	lso, err := n.admin().ListCommittedOffsets(ctx, "open")
	if err != nil || lso["open"][0].Offset != 1 {
		t.Fatalf("read_committed latest %+v %v, want 1 (the open transaction's first offset)", lso, err)
	}
	if got := readAll(t, n, "open", kgo.ReadCommitted()); len(got) != 1 || got[0] != "before" {
		t.Fatalf("read_committed during the transaction: %v, want [before]", got)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, n, "open", kgo.ReadCommitted()); len(got) != 3 {
		t.Fatalf("read_committed after commit: %v, want all three", got)
	}
}

// TestTxnZombieFenced: a second producer with the same transactional id
// fences the first: its open transaction is aborted and everything it
// sends after is refused.
func TestTxnZombieFenced(t *testing.T) {
	n := startNode(t, "")
	n.createTopic("zombie", 1)
	ctx := testCtx(t, 30*time.Second)
	old := n.client(kgo.TransactionalID("z"), kgo.DefaultProduceTopic("zombie"), kgo.RecordRetries(2))
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := old.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie-1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cur := n.client(kgo.TransactionalID("z"), kgo.DefaultProduceTopic("zombie"))
	if err := cur.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cur.ProduceSync(ctx, &kgo.Record{Value: []byte("current")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cur.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	err := old.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie-2")}).FirstErr()
	if err == nil {
		err = old.EndTransaction(ctx, kgo.TryCommit)
	}
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("zombie: %v, want PRODUCER_FENCED", err)
	}
	if got := readAll(t, n, "zombie", kgo.ReadCommitted()); len(got) != 1 || got[0] != "current" {
		t.Fatalf("read_committed: %v, want only the current producer's record", got)
	}
}

// TestTxnTimeoutAborts: a producer that opens a transaction and goes away
// has it aborted after transaction.timeout.ms: its records are invisible
// to read_committed, visible to read_uncommitted, and the LSO moves on.
func TestTxnTimeoutAborts(t *testing.T) {
	n := startNode(t, "")
	n.createTopic("timeout", 1)
	ctx := testCtx(t, 30*time.Second)
	gone := n.client(kgo.TransactionalID("gone"), kgo.DefaultProduceTopic("timeout"), kgo.TransactionTimeout(time.Second))
	if err := gone.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := gone.ProduceSync(ctx, &kgo.Record{Value: []byte("left open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		txns, _, _ := n.b.DescribeTransactions([]string{"gone"})
		if len(txns) == 1 && txns[0].State.String() == "CompleteAbort" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("transaction not aborted after its timeout: %+v", txns)
		}
		time.Sleep(100 * time.Millisecond)
	}
	p := n.client(kgo.TransactionalID("next"), kgo.DefaultProduceTopic("timeout"))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("next")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, n, "timeout", kgo.ReadCommitted()); len(got) != 1 || got[0] != "next" {
		t.Fatalf("read_committed: %v, want [next]", got)
	}
	if got := readAll(t, n, "timeout", kgo.ReadUncommitted()); len(got) != 2 {
		t.Fatalf("read_uncommitted: %v, want both", got)
	}
	if err := gone.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the timed-out producer committed")
	}
}
