package broker

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// txnProducer drives one transactional producer through the broker's API,
// as the Kafka front-end would.
type txnProducer struct {
	e   *env
	id  string
	pid ProducerID
	seq map[int32]int32
}

func (e *env) txnProducer(id string) *txnProducer {
	e.t.Helper()
	pid, err := e.b.InitTransactionalProducer(id, time.Minute, TxnProducer{ID: -1, Epoch: -1})
	if err != nil {
		e.t.Fatal(err)
	}
	return &txnProducer{e: e, id: id, pid: pid, seq: map[int32]int32{}}
}

// produce adds the partition and writes one transactional batch of values.
func (p *txnProducer) produce(topic string, part int32, values ...string) int64 {
	p.e.t.Helper()
	if errs, err := p.e.b.AddPartitionsToTxn(p.id, p.pid.ID, p.pid.Epoch, []TxnPartition{{Topic: topic, Partition: part}}); err != nil || errs[0] != nil {
		p.e.t.Fatalf("add partition: %v %v", err, errs)
	}
	res, err := p.e.b.ProduceBatches(context.Background(), topic, part, [][]byte{txnBatch(p.pid, p.seq[part], values...)})
	if err != nil {
		p.e.t.Fatalf("produce: %v", err)
	}
	p.seq[part] += int32(len(values))
	return res.BaseOffsets[0]
}

func (p *txnProducer) end(commit bool) {
	p.e.t.Helper()
	if err := p.e.b.EndTxn(p.id, p.pid.ID, p.pid.Epoch, commit); err != nil {
		p.e.t.Fatalf("end txn: %v", err)
	}
}

// txnBatch builds a transactional batch, stamped with the test clock's
// start (a record older than the retention would be expired, not delivered).
func txnBatch(pid ProducerID, seq int32, values ...string) []byte {
	var recs []batch.Record
	for _, v := range values {
		recs = append(recs, batch.Record{Timestamp: newClock().Now().UnixMilli(), Value: []byte(v)})
	}
	raw, err := batch.Build(recs, batch.Options{Producer: &batch.Producer{ID: pid.ID, Epoch: pid.Epoch, BaseSequence: seq}, Transactional: true})
	if err != nil {
		panic(err)
	}
	return raw
}

func (e *env) plain(topic string, values ...string) {
	e.t.Helper()
	var recs []ProduceRecord
	for _, v := range values {
		recs = append(recs, ProduceRecord{Value: []byte(v), Partition: new(int32)})
	}
	if _, err := e.b.Produce(context.Background(), topic, recs, ProduceOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// committedValues reads partition 0 through the native Fetch.
func (e *env) committedValues(topic string) []string {
	e.t.Helper()
	var out []string
	for off := int64(0); ; {
		res, err := e.b.Fetch(context.Background(), topic, 0, off, FetchOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		if res.Next < 0 {
			return out
		}
		err = eachRecord(res.Batches, func(r batch.Record) bool {
			if r.Offset >= off {
				out = append(out, string(r.Value))
			}
			return true
		})
		if err != nil {
			e.t.Fatal(err)
		}
		off = res.Next
	}
}

func (e *env) state(topic string) PartitionState {
	e.t.Helper()
	sec, err := e.b.FetchSection(topic, 0, 0, SectionOptions{ReadCommitted: true})
	if err != nil {
		e.t.Fatal(err)
	}
	return sec.PartitionState
}

// TestTxnLastStableOffset: an open transaction holds the LSO at its first
// offset; its commit moves the LSO on and its records become visible; an
// abort hides them and lists the transaction for read_committed fetches.
func TestTxnLastStableOffset(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("t", 1)
	e.plain("t", "p0")
	a := e.txnProducer("a")
	first := a.produce("t", 0, "a1", "a2")
	e.plain("t", "p1")
	if st := e.state("t"); st.LastStableOffset != first || st.HighWatermark != 4 {
		t.Fatalf("open: %+v, want LSO %d", st, first)
	}
	if got := e.committedValues("t"); !slices.Equal(got, []string{"p0"}) {
		t.Fatalf("native fetch during the transaction: %v", got)
	}
	a.end(false)
	st := e.state("t")
	if st.LastStableOffset != st.HighWatermark || st.HighWatermark != 5 {
		t.Fatalf("after abort: %+v, want LSO = HW = 5 (the marker took offset 4)", st)
	}
	sec, _ := e.b.FetchSection("t", 0, 0, SectionOptions{ReadCommitted: true})
	if want := []AbortedTxn{{a.pid.ID, first, 4}}; !slices.Equal(sec.Aborted, want) {
		t.Fatalf("aborted %+v, want %+v", sec.Aborted, want)
	}
	if got := e.committedValues("t"); !slices.Equal(got, []string{"p0", "p1"}) {
		t.Fatalf("native fetch after abort: %v", got)
	}
	a.produce("t", 0, "a3")
	a.end(true)
	if got := e.committedValues("t"); !slices.Equal(got, []string{"p0", "p1", "a3"}) {
		t.Fatalf("native fetch after commit: %v", got)
	}
}

// TestTxnStateSurvivesRestart: the open and aborted transactions of a
// partition are the same after a clean restart (snapshot), a crash (the
// snapshot is older: scan after it) and with no snapshot at all (scan).
func TestTxnStateSurvivesRestart(t *testing.T) {
	for _, how := range []string{"restart", "crash", "no snapshot"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t, nil)
			e.createTopic("t", 1)
			a, b := e.txnProducer("a"), e.txnProducer("b")
			a.produce("t", 0, "a1")
			a.end(false)
			e.restart() // a snapshot with the aborted transaction
			a.pid, a.seq = e.txnProducer("a").pid, map[int32]int32{}
			bFirst := b.produce("t", 0, "b1")
			a.produce("t", 0, "a2")
			a.end(false)
			before := e.state("t")
			sec, _ := e.b.FetchSection("t", 0, 0, SectionOptions{ReadCommitted: true})
			switch how {
			case "restart":
				e.restart()
			case "crash":
				e.crash()
			case "no snapshot":
				e.b.Close()
				if err := e.fs.Remove("/data/topics/1-t/0/" + txnSnapshotFile); err != nil {
					t.Fatal(err)
				}
				e.open()
			}
			after := e.state("t")
			if after != before || after.LastStableOffset != bFirst {
				t.Fatalf("state %+v, before %+v (LSO should be b's first offset %d)", after, before, bFirst)
			}
			sec2, _ := e.b.FetchSection("t", 0, 0, SectionOptions{ReadCommitted: true})
			if !slices.Equal(sec.Aborted, sec2.Aborted) || len(sec2.Aborted) != 1 {
				t.Fatalf("aborted %+v, before %+v", sec2.Aborted, sec.Aborted)
			}
			// The coordinator survived too: b's transaction is still open
			// and can commit.
			if err := e.b.EndTxn("b", b.pid.ID, b.pid.Epoch, true); err != nil {
				t.Fatal(err)
			}
			if got := e.committedValues("t"); !slices.Equal(got, []string{"b1"}) {
				t.Fatalf("after commit: %v", got)
			}
		})
	}
}

// TestTxnProduceVerified: KIP-890 part 1. A transactional batch for a
// partition not added, from an old epoch, or from no transactional
// producer writes nothing; a control batch from a client is refused.
func TestTxnProduceVerified(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("t", 2)
	a := e.txnProducer("a")
	a.produce("t", 0, "ok")
	cases := map[string]struct {
		raw  []byte
		part int32
		want error
	}{
		"partition not added": {txnBatch(a.pid, 0, "x"), 1, ErrInvalidTxnState},
		"old epoch":           {txnBatch(ProducerID{ID: a.pid.ID, Epoch: a.pid.Epoch - 1}, 1, "x"), 0, ErrTxnFenced},
		"unknown producer":    {txnBatch(ProducerID{ID: 999, Epoch: 0}, 0, "x"), 0, ErrInvalidPIDMapping},
	}
	marker, _ := batch.BuildMarker(a.pid.ID, a.pid.Epoch, true, 0, 1)
	cases["control batch"] = struct {
		raw  []byte
		part int32
		want error
	}{marker, 0, ErrControlBatch}
	for name, c := range cases {
		if _, err := e.b.ProduceBatches(context.Background(), "t", c.part, [][]byte{c.raw}); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	if hw := e.state("t").HighWatermark; hw != 1 {
		t.Fatalf("high watermark %d: a refused batch was written", hw)
	}
}

// TestTxnSubscriptionSkipsAborted: a subscription over a topic delivers
// committed records only, waits at an open transaction, and never
// delivers a marker.
func TestTxnSubscriptionSkipsAborted(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("t", 1)
	e.createSub(SubscriptionSettings{Topic: "t", Name: "s", FromEarliest: true})
	a := e.txnProducer("a")
	e.plain("t", "p0")
	a.produce("t", 0, "aborted")
	a.end(false)
	a.produce("t", 0, "open")
	e.plain("t", "p1")
	var got []string
	drain := func() {
		for {
			ds := e.subReceive("t", "s", 10)
			if len(ds) == 0 {
				return
			}
			got = append(got, values(ds)...)
			e.subAck("t", "s", ds...)
		}
	}
	drain()
	if !slices.Equal(got, []string{"p0"}) {
		t.Fatalf("delivered %v, want [p0]: p1 waits behind the open transaction", got)
	}
	a.end(true)
	drain()
	if !slices.Equal(got, []string{"p0", "open", "p1"}) {
		t.Fatalf("delivered %v, want [p0 open p1]", got)
	}
}

// TestTxnMarkersSurviveCrashMidEnd: a crash between the commit decision
// and its markers is finished at open: the markers are written and the
// LSO moves on.
func TestTxnMarkersSurviveCrashMidEnd(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem)
	e := newEnv(t, efs)
	e.createTopic("t", 1)
	a := e.txnProducer("a")
	a.produce("t", 0, "v")
	if err := e.b.AddOffsetsToTxn("a", a.pid.ID, a.pid.Epoch, "g"); err != nil {
		t.Fatal(err)
	}
	if err := e.b.TxnOffsetCommit("a", a.pid.ID, a.pid.Epoch, CommitRequest{Group: "g", Generation: -1,
		Offsets: []OffsetCommit{{Topic: "t", Partition: 0, Offset: 7, LeaderEpoch: -1}}}, false); err != nil {
		t.Fatal(err)
	}
	// The marker's write fails: the decision is durable, the markers not.
	efs.Inject(vfs.Fault{Op: vfs.OpWrite, Path: "", Match: func(_ vfs.Op, path string) bool {
		return len(path) > len("/data/topics") && path[:len("/data/topics")] == "/data/topics"
	}})
	if err := e.b.EndTxn("a", a.pid.ID, a.pid.Epoch, true); err != nil {
		t.Fatalf("end: %v (the decision is durable: success)", err)
	}
	efs.ClearFaults()
	if txns, _, _ := e.b.DescribeTransactions([]string{"a"}); efs.Fired(vfs.OpWrite) == 0 || txns[0].State.String() != "PrepareCommit" {
		t.Fatalf("the marker write did not fail: %d faults, state %v", efs.Fired(vfs.OpWrite), txns[0].State)
	}
	crashed := mem.CrashClone()
	old := e.b
	e.fs = crashed
	e.open()
	go old.Close()
	if got := e.committedValues("t"); !slices.Equal(got, []string{"v"}) {
		t.Fatalf("after crash: %v, want the committed record", got)
	}
	// Finished at open, before anything is served: the offsets too.
	if c, ok := e.b.FetchOffset("g", "t", 0); !ok || c.Offset != 7 {
		t.Fatalf("offset after crash: %+v %v, want the transaction's 7", c, ok)
	}
	txns, _, _ := e.b.DescribeTransactions([]string{"a"})
	if txns[0].State.String() != "CompleteCommit" {
		t.Fatalf("state %v", txns[0].State)
	}
}

// TestTxnLSOWaitsForMarker: while a marker is being appended the LSO is
// not answered: the high watermark a reader already holds may include the
// marker, and an LSO below it would make the reader wait for the log to
// grow past that watermark instead of returning the committed records.
func TestTxnLSOWaitsForMarker(t *testing.T) {
	var tp txnPartition
	tp.mu.Lock()
	tp.noteOpenLocked(7, 10)
	tp.inFlight++
	tp.mu.Unlock()
	got := make(chan int64, 1)
	go func() { got <- tp.lso(12) }()
	select {
	case l := <-got:
		t.Fatalf("lso answered %d with a marker in flight", l)
	case <-time.After(50 * time.Millisecond):
	}
	tp.mu.Lock()
	tp.inFlight--
	tp.noteMarkerLocked(7, true, 11)
	tp.cond().Broadcast()
	tp.mu.Unlock()
	if l := <-got; l != 12 {
		t.Fatalf("lso %d after the marker, want the high watermark 12", l)
	}
}
