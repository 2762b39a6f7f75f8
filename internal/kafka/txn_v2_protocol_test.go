package kafka

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/broker"
)

// fakeNow is a clock tests move by hand; the broker's ticker reads it
// from its own goroutine.
type fakeNow struct{ ms atomic.Int64 }

func (f *fakeNow) now() time.Time          { return time.UnixMilli(f.ms.Load()) }
func (f *fakeNow) advance(d time.Duration) { f.ms.Add(d.Milliseconds()) }

// startNodeClock is startNode on a broker that reads ck.
func startNodeClock(t *testing.T, ck *fakeNow) *node {
	t.Helper()
	dir := t.TempDir()
	b, err := broker.Open(broker.Options{Dir: dir, Logger: quietLogger(), Sync: broker.SyncPolicy{Mode: broker.SyncNever}, Now: ck.now})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, dir: dir, b: b, s: New(b, withLogger(Config{})), addr: ln.Addr().String(), done: make(chan error, 1)}
	go func() { n.done <- n.s.Serve(ln) }()
	t.Cleanup(n.stop)
	return n
}

// produceV sends one transactional batch with produce version v.
func (x *txnRaw) produceV(v int16, topic string, part int32, epoch int16, seq int32) int16 {
	raw, err := batch.Build([]batch.Record{{Timestamp: 1, Value: []byte("v")}},
		batch.Options{Producer: &batch.Producer{ID: x.pid, Epoch: epoch, BaseSequence: seq}, Transactional: true})
	if err != nil {
		x.t.Fatal(err)
	}
	req := produceReq(v, -1, topic, part, raw)
	req.TransactionID = &x.id
	return x.r.do(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
}

// endV sends EndTxn version v and returns its code and answered producer.
func (x *txnRaw) endV(v int16, epoch int16, commit bool) (int16, int64, int16) {
	req := kmsg.NewPtrEndTxnRequest()
	req.SetVersion(v)
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = x.id, x.pid, epoch, commit
	resp := x.r.do(req).(*kmsg.EndTxnResponse)
	return resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch
}

// offsetsV sends TxnOffsetCommit version v of group's partition 0.
func (x *txnRaw) offsetsV(v int16, group, topic string, epoch int16, offset int64) int16 {
	tc := kmsg.NewPtrTxnOffsetCommitRequest()
	tc.SetVersion(v)
	tc.TransactionalID, tc.Group, tc.ProducerID, tc.ProducerEpoch, tc.Generation = x.id, group, x.pid, epoch, -1
	tct := kmsg.NewTxnOffsetCommitRequestTopic()
	tct.Topic = topic
	tcp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	tcp.Partition, tcp.Offset = 0, offset
	tct.Partitions = append(tct.Partitions, tcp)
	tc.Topics = append(tc.Topics, tct)
	return x.r.do(tc).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

func (x *txnRaw) addOffsetsV(v int16, group string, epoch int16) int16 {
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.SetVersion(v)
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = x.id, x.pid, epoch, group
	return x.r.do(ao).(*kmsg.AddOffsetsToTxnResponse).ErrorCode
}

// TestTxnV2Features: ApiVersions v3+ finalize transaction.version 2, the
// switch clients turn KIP-890 part 2 on with; v0-2 carry no features.
func TestTxnV2Features(t *testing.T) {
	n := startNode(t, "")
	r := n.raw()
	for _, v := range []int16{2, 3, 4} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(v)
		req.ClientSoftwareName, req.ClientSoftwareVersion = "t", "1"
		resp := r.do(req).(*kmsg.ApiVersionsResponse)
		got := int16(-1)
		for _, f := range resp.FinalizedFeatures {
			if f.Name == "transaction.version" && resp.FinalizedFeaturesEpoch >= 0 {
				got = f.MaxVersionLevel
			}
		}
		if want := map[bool]int16{true: 2, false: -1}[v >= 3]; got != want {
			t.Errorf("ApiVersions v%d: transaction.version %d, want %d (%+v)", v, got, want, resp)
		}
	}
}

// TestTxnV2ProtocolErrors sends KIP-890 part 2's requests by hand, each
// refusal checked against Kafka's answer, beside the older versions'
// answers to the same moments, which stay what they were.
func TestTxnV2ProtocolErrors(t *testing.T) {
	n := startNode(t, "")
	n.createTopic("v2", 3)
	x := initTxnRaw(t, n.raw(), "v2")
	e0 := x.epoch

	wantCode(t, "produce v11 to a partition not added", x.produceV(11, "v2", 1, e0, 0), kerr.InvalidTxnState)
	wantCode(t, "produce v12 adds its partition", x.produceV(12, "v2", 0, e0, 0), nil)
	wantCode(t, "produce v12 again", x.produceV(12, "v2", 0, e0, 1), nil)
	wantCode(t, "TxnOffsetCommit v4 without AddOffsetsToTxn", x.offsetsV(4, "g4", "v2", e0, 1), kerr.InvalidTxnState)
	wantCode(t, "TxnOffsetCommit v5 adds its group", x.offsetsV(5, "g5", "v2", e0, 7), nil)
	wantCode(t, "AddOffsetsToTxn v4", x.addOffsetsV(4, "g4", e0), nil)
	wantCode(t, "TxnOffsetCommit v4 once added", x.offsetsV(4, "g4", "v2", e0, 3), nil)

	code, pid, e1 := x.endV(5, e0, true)
	wantCode(t, "EndTxn v5 commit", code, nil)
	if pid != x.pid || e1 != e0+1 {
		t.Fatalf("EndTxn v5 answered %d/%d, want %d/%d", pid, e1, x.pid, e0+1)
	}
	code, pid, again := x.endV(5, e0, true)
	wantCode(t, "EndTxn v5 commit retried", code, nil)
	if pid != x.pid || again != e1 {
		t.Errorf("retry answered %d/%d, want %d/%d", pid, again, x.pid, e1)
	}
	code, pid, _ = x.endV(5, e0, false)
	wantCode(t, "EndTxn v5 abort at the committed epoch", code, kerr.InvalidTxnState)
	if pid != -1 {
		t.Errorf("a refused EndTxn v5 answered producer %d, want -1", pid)
	}
	if code := x.produceV(12, "v2", 0, e0, 2); code != kerr.ProducerFenced.Code {
		t.Errorf("late produce of the committed transaction: %v, want PRODUCER_FENCED", kerr.ErrorForCode(code))
	}
	wantCode(t, "late TxnOffsetCommit v5", x.offsetsV(5, "g5", "v2", e0, 8), kerr.ProducerFenced)
	wantCode(t, "EndTxn v4 at the old epoch", x.end(e0, true), kerr.ProducerFenced)
	code, _, e2 := x.endV(5, e1, false)
	wantCode(t, "EndTxn v5 abort with nothing open", code, nil)
	if e2 != e1+1 {
		t.Errorf("empty abort answered epoch %d, want %d", e2, e1+1)
	}
	wantCode(t, "EndTxn v5 commit with nothing open", first(x.endV(5, e2, true)), kerr.InvalidTxnState)
	wantCode(t, "next transaction at the new epoch (sequence 0)", x.produceV(12, "v2", 2, e2, 0), nil)
	code, _, e3 := x.endV(5, e2, false)
	wantCode(t, "EndTxn v5 abort", code, nil)

	// The commit's markers carry the epoch bumped at its end (e1), the
	// abort's e3; the committed offsets are g4's and g5's.
	cl := n.client(kgo.ConsumeTopics("v2"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.KeepControlRecords())
	defer cl.Close()
	markers := map[int32]int16{}
	for deadline := time.Now().Add(10 * time.Second); len(markers) < 2 && time.Now().Before(deadline); {
		fs := cl.PollFetches(testCtx(t, time.Second))
		fs.EachRecord(func(r *kgo.Record) {
			if r.Attrs.IsControl() {
				markers[r.Partition] = r.ProducerEpoch
			}
		})
	}
	if markers[0] != e1 || markers[2] != e3 {
		t.Errorf("marker epochs by partition %v, want 0: %d, 2: %d", markers, e1, e3)
	}
	offs, err := n.admin().FetchOffsets(testCtx(t, 5*time.Second), "g5")
	if o, _ := offs.Lookup("v2", 0); err != nil || o.At != 7 {
		t.Errorf("g5's offset after the commit: %+v %v, want 7", o, err)
	}
}

func first(code int16, _ int64, _ int16) int16 { return code }

// TestTxnV2TimeoutAbortable: a transaction aborted at its timeout bumps
// the epoch. A part-2 producer still at the old epoch is told
// TRANSACTION_ABORTABLE by produce v12, TxnOffsetCommit v5,
// AddOffsetsToTxn v4 and a commit, and its abort succeeds with the
// current epoch, so it goes on; the older versions answer PRODUCER_FENCED
// as before.
func TestTxnV2TimeoutAbortable(t *testing.T) {
	ck := &fakeNow{}
	ck.advance(time.Hour)
	n := startNodeClock(t, ck)
	n.createTopic("to", 1)
	x := initTxnRaw(t, n.raw(), "to")
	e0 := x.epoch
	wantCode(t, "produce v12", x.produceV(12, "to", 0, e0, 0), nil)
	ck.advance(61 * time.Second) // initTxnRaw's timeout is 60 s
	n.b.TickTransactions()

	wantCode(t, "produce v12 after the timeout abort", x.produceV(12, "to", 0, e0, 1), kerr.TransactionAbortable)
	wantCode(t, "produce v11 after the timeout abort", x.produceV(11, "to", 0, e0, 1), kerr.ProducerFenced)
	wantCode(t, "TxnOffsetCommit v5", x.offsetsV(5, "g", "to", e0, 1), kerr.TransactionAbortable)
	wantCode(t, "TxnOffsetCommit v4", x.offsetsV(4, "g", "to", e0, 1), kerr.ProducerFenced)
	wantCode(t, "AddOffsetsToTxn v4", x.addOffsetsV(4, "g", e0), kerr.TransactionAbortable)
	wantCode(t, "AddOffsetsToTxn v3", x.addOffsetsV(3, "g", e0), kerr.ProducerFenced)
	wantCode(t, "EndTxn v4 commit", x.end(e0, true), kerr.ProducerFenced)
	wantCode(t, "EndTxn v5 commit", first(x.endV(5, e0, true)), kerr.TransactionAbortable)
	code, pid, e1 := x.endV(5, e0, false)
	wantCode(t, "EndTxn v5 abort", code, nil)
	if pid != x.pid || e1 != e0+1 {
		t.Fatalf("abort answered %d/%d, want %d/%d", pid, e1, x.pid, e0+1)
	}
	wantCode(t, "next transaction", x.produceV(12, "to", 0, e1, 0), nil)
	wantCode(t, "EndTxn v5 commit of it", first(x.endV(5, e1, true)), nil)
	if got := readAll(t, n, "to", kgo.ReadCommitted()); len(got) != 1 {
		t.Errorf("read_committed: %d records, want the second transaction's one", len(got))
	}
}

// TestTxnV2FranzGo: franz-go, seeing transaction.version 2, runs its
// transactions the part-2 way: the commit bumps the epoch, and the
// partition joins the transaction through produce v12+ alone. Capped at
// EndTxn v4 it keeps the part-1 way (AddPartitionsToTxn, one epoch), which
// sluice serves as before.
func TestTxnV2FranzGo(t *testing.T) {
	part1 := txnPart1Versions()
	for _, tc := range []struct {
		name string
		opts []kgo.Opt
		bump int16
	}{
		{"part 2", nil, 1},
		{"part 1 (EndTxn capped at v4)", []kgo.Opt{kgo.MaxVersions(part1)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := startNode(t, "")
			n.createTopic("fv2", 2)
			ctx := testCtx(t, 30*time.Second)
			cl := n.client(append(tc.opts, kgo.TransactionalID("fv2"), kgo.DefaultProduceTopic("fv2"))...)
			defer cl.Close()
			epochs := []int16{}
			for i := range 2 {
				if err := cl.BeginTransaction(); err != nil {
					t.Fatal(err)
				}
				if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte('a' + i)}}).FirstErr(); err != nil {
					t.Fatal(err)
				}
				d, _, err := n.b.DescribeTransactions([]string{"fv2"})
				if err != nil || len(d) != 1 || len(d[0].Partitions) != 1 {
					t.Fatalf("describe during transaction %d: %+v %v", i, d, err)
				}
				epochs = append(epochs, d[0].Epoch)
				if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
					t.Fatal(err)
				}
			}
			if epochs[1] != epochs[0]+tc.bump {
				t.Errorf("epochs of two transactions %v: want a bump of %d at the first commit", epochs, tc.bump)
			}
			if got := readAll(t, n, "fv2", kgo.ReadCommitted()); len(got) != 2 {
				t.Errorf("read_committed: %v, want both records", got)
			}
		})
	}
}
