package kafka

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testproc"
)

// etlChildEnv names the broker address a TestTxnETLChild process
// processes against; unset, that test does nothing.
const etlChildEnv = "SLUICE_TXN_ETL_CHILD"

// etlInput is how many records the ETL moves.
const etlInput = 3000

// TestTxnETLKill is the consume-transform-produce loop of issue 18
// against the real binary: a franz-go GroupTransactSession (a child
// process) reads "in", writes "out-<value>" to "out" and commits its input
// offsets in the same transaction, while the broker and the processor are
// killed with SIGKILL at random moments and restarted. Afterwards "out",
// read with read_committed, holds every input exactly once. ~30 s;
// SLUICE_TXN_ETL_SECONDS runs the kill phase longer.
func TestTxnETLKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	phase := 20 * time.Second
	if s, err := strconv.Atoi(os.Getenv("SLUICE_TXN_ETL_SECONDS")); err == nil && s > 0 {
		phase = time.Duration(s) * time.Second
	}
	bin := testproc.Build(t, t.TempDir())
	dir, addr := t.TempDir(), testproc.StableAddr(t) // restarted on it: below the ephemeral range
	serve := func() *testproc.Proc {
		p := testproc.Serve(t, bin, "--data-dir", dir, "--http-addr", "127.0.0.1:0", "--kafka-addr", addr, "--sqs-addr", "")
		p.Addr("kafka")
		return p
	}
	broker := serve()
	n := &node{t: t, addr: addr}
	ctx := testCtx(t, phase+3*time.Minute)
	adm := kadm.NewClient(n.client())
	for _, topic := range []string{"in", "out"} {
		if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	var recs []*kgo.Record
	for i := range etlInput {
		recs = append(recs, &kgo.Record{Topic: "in", Key: []byte(strconv.Itoa(i % 17)), Value: []byte(strconv.Itoa(i))})
	}
	if err := n.client().ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 18))
	child := startETLChild(t, addr)
	kills := map[string]int{}
	for end := time.Now().Add(phase); time.Now().Before(end); {
		time.Sleep(time.Duration(300+rng.IntN(1500)) * time.Millisecond)
		switch rng.IntN(3) {
		case 0:
			broker.Kill()
			kills["broker"]++
			broker = serve()
		case 1:
			child.kill()
			kills["processor"]++
		default:
			broker.Kill()
			child.kill()
			kills["both"]++
			broker = serve()
		}
		if child.exited() {
			child = startETLChild(t, addr)
		}
	}
	t.Logf("kills: %v", kills)
	// Let the processor finish the input, restarting it if it gave up.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if child.exited() {
			child = startETLChild(t, addr)
		}
		lag, err := adm.Lag(ctx, "etl")
		if err == nil && lag.Sorted()[0].Lag.Total() == 0 && len(lag["etl"].Lag["in"]) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the processor did not finish the input: lag %+v, %v", lag, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	child.kill()

	got := readAll(t, n, "out", kgo.ReadCommitted())
	seen := map[string]int{}
	for _, v := range got {
		seen[v]++
	}
	for i := range etlInput {
		if c := seen["out-"+strconv.Itoa(i)]; c != 1 {
			t.Errorf("input %d is in the output %d times, want exactly once", i, c)
		}
	}
	if len(got) != etlInput {
		t.Errorf("read_committed output holds %d records, want %d", len(got), etlInput)
	}
	all := readAll(t, n, "out", kgo.ReadUncommitted())
	t.Logf("output: %d committed, %d including aborted", len(got), len(all))
	broker.Stop()
}

// etlChild is a processor process.
type etlChild struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startETLChild(t *testing.T, addr string) *etlChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestTxnETLChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), etlChildEnv+"="+addr)
	if testing.Verbose() {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &etlChild{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(c.done) }()
	t.Cleanup(c.kill)
	return c
}

func (c *etlChild) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *etlChild) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

// TestTxnETLChild is the processor TestTxnETLKill runs as a child. It
// exits on the first error (the broker died, the group moved): the parent
// starts another, as a supervisor would.
func TestTxnETLChild(t *testing.T) {
	addr := os.Getenv(etlChildEnv)
	if addr == "" {
		t.Skip("the child of TestTxnETLKill")
	}
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(addr), kgo.TransactionalID("etl"),
		kgo.TransactionTimeout(10*time.Second), kgo.ConsumerGroup("etl"), kgo.InstanceID("etl-0"),
		kgo.ConsumeTopics("in"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), // franz-go always asks require_stable
		kgo.RequestRetries(3), kgo.RetryTimeout(5*time.Second), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for ctx.Err() == nil {
		fs := sess.PollRecords(ctx, 25)
		if err := fs.Err0(); err != nil {
			t.Fatalf("poll: %v", err)
		}
		if fs.NumRecords() == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			t.Fatalf("begin: %v", err)
		}
		var failed atomic.Bool
		fs.EachRecord(func(r *kgo.Record) {
			out := &kgo.Record{Topic: "out", Key: r.Key, Value: fmt.Appendf(nil, "out-%s", r.Value)}
			sess.Produce(ctx, out, func(_ *kgo.Record, err error) { failed.Store(failed.Load() || err != nil) })
		})
		if err := sess.Client().Flush(ctx); err != nil {
			t.Fatalf("flush: %v", err)
		}
		// Slow, so that the kills land inside transactions, between
		// produce and commit, and the input lasts the kill phase.
		time.Sleep(time.Duration(rand.IntN(80)) * time.Millisecond)
		committed, err := sess.End(ctx, kgo.TransactionEndTry(!failed.Load()))
		if err != nil {
			t.Fatalf("end: %v", err)
		}
		t.Logf("%d records, committed %v", fs.NumRecords(), committed)
	}
}
