package broker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/group"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// cursorTarget drives a queue or a subscription through the same calls, so
// one scenario checks both: what the shared cursorSet fixes holds for both.
type cursorTarget struct {
	name    string
	journal string // path prefix of its journal
	open    func(e *env, ordered bool)
	send    func(e *env, bodies ...string)
	receive func(e *env, max int) []string // receipts
	// receiveErr is receive without failing the test on an error.
	receiveErr func(e *env, max int) ([]string, error)
	ack        func(e *env, receipt string) error
	ackAll     func(e *env, receipts ...string) ([]error, error)
	nack       func(e *env, receipt string) error
	stats      func(e *env) QueueStats
	wake       func(e *env) <-chan struct{} // what a long-poll waiting now waits on
}

var cursorTargets = []cursorTarget{
	{
		name: "queue", journal: "/data/queues/",
		open: func(e *env, ordered bool) {
			e.createQueue(QueueSettings{Name: testQueue(ordered), FIFO: ordered, ContentBasedDedup: ordered})
		},
		send: func(e *env, bodies ...string) {
			in := make([]SendInput, len(bodies))
			for i, b := range bodies {
				in[i] = SendInput{Body: []byte(b)}
				if e.b.queues[testQueue(true)] != nil {
					in[i].GroupID = "g"
				}
			}
			if _, err := e.b.Send(context.Background(), e.queueName(), in); err != nil {
				e.t.Fatal(err)
			}
		},
		receive: func(e *env, max int) []string {
			var rs []string
			for _, d := range e.receive(e.queueName(), max) {
				rs = append(rs, d.Receipt)
			}
			return rs
		},
		receiveErr: func(e *env, max int) ([]string, error) {
			ds, err := e.b.Receive(context.Background(), e.queueName(), ReceiveOptions{Max: max})
			var rs []string
			for _, d := range ds {
				rs = append(rs, d.Receipt)
			}
			return rs, err
		},
		ack: func(e *env, r string) error { return e.b.Ack(context.Background(), e.queueName(), r) },
		ackAll: func(e *env, rs ...string) ([]error, error) {
			return e.b.AckBatch(context.Background(), e.queueName(), rs)
		},
		nack: func(e *env, r string) error { return e.b.Nack(context.Background(), e.queueName(), r, 0, "") },
		stats: func(e *env) QueueStats {
			st, err := e.b.QueueStats(e.queueName())
			if err != nil {
				e.t.Fatal(err)
			}
			return st
		},
		wake: func(e *env) <-chan struct{} { return wakeChan(&e.b.queues[e.queueName()].machine) },
	},
	{
		name: "subscription", journal: "/data/topics/",
		open: func(e *env, ordered bool) {
			e.createTopic("t", 1)
			e.createSub(SubscriptionSettings{Topic: "t", Name: "s", KeyOrdered: ordered})
		},
		send: func(e *env, bodies ...string) {
			for _, b := range bodies {
				e.produce("t", kv("k", b))
			}
		},
		receive: func(e *env, max int) []string {
			var rs []string
			for _, d := range e.subReceive("t", "s", max) {
				rs = append(rs, d.Receipt)
			}
			return rs
		},
		receiveErr: func(e *env, max int) ([]string, error) {
			ds, err := e.b.SubscriptionReceive(context.Background(), "t", "s", ReceiveOptions{Max: max})
			var rs []string
			for _, d := range ds {
				rs = append(rs, d.Receipt)
			}
			return rs, err
		},
		ack: func(e *env, r string) error { return e.b.SubscriptionAck(context.Background(), "t", "s", r) },
		ackAll: func(e *env, rs ...string) ([]error, error) {
			return e.b.SubscriptionAckBatch(context.Background(), "t", "s", rs)
		},
		nack: func(e *env, r string) error {
			return e.b.SubscriptionNack(context.Background(), "t", "s", r, 0, "")
		},
		stats: func(e *env) QueueStats {
			st, err := e.b.SubscriptionStats("t", "s")
			if err != nil {
				e.t.Fatal(err)
			}
			return st
		},
		wake: func(e *env) <-chan struct{} {
			_, sub, err := e.b.subscription("t", "s")
			if err != nil {
				e.t.Fatal(err)
			}
			return wakeChan(&sub.machine)
		},
	},
}

func testQueue(fifo bool) string {
	if fifo {
		return "q.fifo"
	}
	return "q"
}

// queueName is the test queue cursorTargets made.
func (e *env) queueName() string {
	if e.b.ListQueues("q.fifo") != nil {
		return "q.fifo"
	}
	return "q"
}

func wakeChan(m *machine) <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.wake
}

func woken(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// An ack makes nothing visible unless order is kept (FIFO, key-ordered):
// it must not wake the long-polls, which would only queue for the lock to
// find nothing. A nack makes its message visible and must wake them.
func TestLeaseWakeUps(t *testing.T) {
	for _, tg := range cursorTargets {
		for _, ordered := range []bool{false, true} {
			name := tg.name
			if ordered {
				name += "/ordered"
			}
			t.Run(name, func(t *testing.T) {
				e := newEnv(t, nil)
				tg.open(e, ordered)
				tg.send(e, "a", "b")
				rs := tg.receive(e, 1)
				if len(rs) != 1 {
					t.Fatalf("received %d, want 1", len(rs))
				}
				w := tg.wake(e)
				if err := tg.ack(e, rs[0]); err != nil {
					t.Fatal(err)
				}
				if woken(w) != ordered {
					t.Errorf("ack woke long-polls: %v, want %v", woken(w), ordered)
				}
				rs = tg.receive(e, 1)
				if len(rs) != 1 {
					t.Fatalf("second receive got %d, want 1", len(rs))
				}
				w = tg.wake(e)
				if err := tg.nack(e, rs[0]); err != nil {
					t.Fatal(err)
				}
				if !woken(w) {
					t.Error("nack did not wake long-polls")
				}
			})
		}
	}
}

// Acks and refused stale acks are counted alike for queues and
// subscriptions (they reach /metrics as *_acked_total and
// *_stale_ack_refused_total).
func TestLeaseCounters(t *testing.T) {
	for _, tg := range cursorTargets {
		t.Run(tg.name, func(t *testing.T) {
			e := newEnv(t, nil)
			tg.open(e, false)
			tg.send(e, "a", "b", "c")
			rs := tg.receive(e, 3)
			if len(rs) != 3 {
				t.Fatalf("received %d, want 3", len(rs))
			}
			if err := tg.ack(e, rs[0]); err != nil {
				t.Fatal(err)
			}
			if err := tg.ack(e, rs[0]); !errors.Is(err, ErrReceiptStale) {
				t.Fatalf("second ack: %v, want ErrReceiptStale", err)
			}
			errs, err := tg.ackAll(e, rs[1], rs[0], rs[2])
			if err != nil || errs[0] != nil || !errors.Is(errs[1], ErrReceiptStale) || errs[2] != nil {
				t.Fatalf("batch: %v %v", errs, err)
			}
			st := tg.stats(e)
			if st.Acked != 3 || st.StaleRefused != 2 || st.Received != 3 || st.Depth() != 0 {
				t.Fatalf("stats %+v: want 3 acked, 2 stale refused, 3 received, depth 0", st)
			}
			// Acks are the cursors' own, rebuilt by the journal; refusals
			// change nothing durable and count since the start.
			e.restart()
			st = tg.stats(e)
			if st.Acked != 3 || st.StaleRefused != 0 || st.Received != 3 || st.Depth() != 0 {
				t.Fatalf("after restart %+v: want 3 acked, 0 stale refused, 3 received, depth 0", st)
			}
		})
	}
}

// One recovery policy after a journal failure, for queues, subscriptions
// and the group coordinator alike: the operation whose write failed answers
// with the error; if the disk is still failing when the next operation
// reloads, that operation answers "unavailable" and the state in memory is
// kept (never replaced by a half-read one); once the disk heals, the next
// operation reloads and sees exactly what is durable.
func TestJournalFailureRecovery(t *testing.T) {
	for _, tg := range cursorTargets {
		t.Run(tg.name, func(t *testing.T) {
			efs := vfs.NewErrorFS(vfs.NewMem())
			e := newEnv(t, efs)
			tg.open(e, false)
			tg.send(e, "a", "b")
			rs := tg.receive(e, 2)
			if len(rs) != 2 {
				t.Fatalf("received %d, want 2", len(rs))
			}
			if err := tg.ack(e, rs[0]); err != nil {
				t.Fatal(err)
			}
			failWritesUnder(efs, tg.journal)
			if err := tg.ack(e, rs[1]); err == nil {
				t.Fatal("ack succeeded though its journal write failed")
			}
			// The reload reads the journal: make that fail once too.
			failReadsUnder(efs, tg.journal, 1)
			if err := tg.ack(e, rs[1]); err == nil || !strings.Contains(err.Error(), "unavailable") {
				t.Fatalf("ack while the journal cannot be read: %v, want unavailable", err)
			}
			// Healed: the failed ack is forgotten, the delivery still in
			// flight with a current receipt.
			if err := tg.ack(e, rs[1]); err != nil {
				t.Fatalf("ack after the disk healed: %v", err)
			}
			if st := tg.stats(e); st.Depth() != 0 {
				t.Fatalf("depth %d after both acks", st.Depth())
			}
			e.restart()
			if st := tg.stats(e); st.Depth() != 0 {
				t.Fatalf("depth %d after restart", st.Depth())
			}
		})
	}
}

func failReadsUnder(efs *vfs.ErrorFS, dir string, n int) {
	efs.Inject(vfs.Fault{Op: vfs.OpReadAt, Count: n, Match: func(_ vfs.Op, path string) bool {
		return strings.HasPrefix(path, dir) && strings.Contains(path, "/journal/")
	}})
}

// The group coordinator follows the same policy: a commit whose write
// failed is forgotten; a reload that cannot read the journal keeps the
// coordinator as it was (its offsets are not lost to a half-read state) and
// is tried again by the next operation.
func TestGroupJournalFailureRecovery(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.NewMem())
	e := newEnvWithLogs(t, efs)
	e.createTopic("t", 1)
	commit := func(g string, off int64) error {
		errs, err := e.b.CommitOffsets(context.Background(), commitReq(g, "t", off))
		return errors.Join(err, errors.Join(errs...))
	}
	for _, g := range []string{"g1", "g2"} {
		if err := commit(g, 5); err != nil {
			t.Fatal(err)
		}
	}
	failWritesUnder(efs, "/data/groups/journal")
	if err := commit("g1", 7); err == nil {
		t.Fatal("commit succeeded though its journal write failed")
	}
	// Two reloads fail: the commit's and the fetch's (answered from
	// memory, which still has g2's offset).
	failReadsUnder(efs, "/data/groups", 2)
	if err := commit("g1", 8); err == nil || !strings.Contains(err.Error(), "unavailable") {
		t.Fatalf("commit while the journal cannot be read: %v, want unavailable", err)
	}
	if got, ok := e.b.FetchOffset("g2", "t", 0); !ok || got.Offset != 5 {
		t.Fatalf("g2 after the failed reload: %+v %v, want 5", got, ok)
	}
	if got, _ := e.b.FetchOffset("g1", "t", 0); got.Offset != 5 {
		t.Fatalf("g1 after the disk healed: %d, want the durable 5", got.Offset)
	}
	if err := commit("g1", 9); err != nil {
		t.Fatal(err)
	}
	// The operator is told, with the failure that made the reload necessary.
	if reload := regexp.MustCompile(`msg="state reloaded from its journal after a write failure".* err="?([^"\n]*)`).FindStringSubmatch(e.logs.String()); reload == nil || reload[1] == "" || reload[1] == "<nil>" {
		t.Fatalf("no warning of the reload naming the write failure in the log:\n%s", e.logs.String())
	}
	e.restart()
	if got, _ := e.b.FetchOffset("g1", "t", 0); got.Offset != 9 {
		t.Fatalf("g1 after restart: %d, want 9", got.Offset)
	}
}

func commitReq(g, topic string, off int64) group.CommitRequest {
	return group.CommitRequest{Group: g, Generation: -1,
		Offsets: []group.OffsetCommit{{Topic: topic, Partition: 0, Offset: off}}}
}

// A dead-letter copy is not held to the dead-letter queue's maximum
// message size, from a queue or a subscription: the message was accepted
// once, and refusing the copy would lose it (subscriptions used to drop it)
// or bring it back to be dead-lettered forever (queues used to).
func TestDeadLetterCopyIgnoresSizeLimit(t *testing.T) {
	big := strings.Repeat("x", 2048)
	for _, tg := range cursorTargets {
		t.Run(tg.name, func(t *testing.T) {
			e := newEnv(t, nil)
			e.createQueue(QueueSettings{Name: "dlq", MaxMessageBytes: 1024})
			switch tg.name {
			case "queue":
				e.createQueue(QueueSettings{Name: "q", DeadLetterQueue: "dlq", MaxReceives: 1})
			default:
				e.createTopic("t", 1)
				e.createSub(SubscriptionSettings{Topic: "t", Name: "s", DeadLetterQueue: "dlq", MaxReceives: 1})
			}
			tg.send(e, big)
			rs := tg.receive(e, 1)
			if len(rs) != 1 {
				t.Fatalf("received %d, want 1", len(rs))
			}
			if err := tg.nack(e, rs[0]); err != nil {
				t.Fatal(err)
			}
			if rs := tg.receive(e, 1); len(rs) != 0 { // the second receive dead-letters it
				t.Fatalf("received %d past max receives", len(rs))
			}
			ds := e.receive("dlq", 10)
			if len(ds) != 1 || string(ds[0].Body) != big {
				t.Fatalf("dead-letter queue holds %d messages, want the one of %d bytes", len(ds), len(big))
			}
			if st := tg.stats(e); st.Depth() != 0 || st.DeadLettered != 1 {
				t.Fatalf("source stats %+v: want depth 0, 1 dead-lettered", st)
			}
		})
	}
}

// A flipped byte in a queue's or a subscription's newest snapshot costs
// nothing: the previous snapshot and the journal after it give the same
// state, so nothing acked comes back and nothing in flight is lost.
func TestDamagedSnapshotCostsNothing(t *testing.T) {
	for _, tg := range cursorTargets {
		t.Run(tg.name, func(t *testing.T) {
			mem := vfs.NewMem()
			e := newEnv(t, mem) // a snapshot every 50 events
			tg.open(e, false)
			var bodiesSent []string
			for i := range 120 {
				bodiesSent = append(bodiesSent, fmt.Sprint(i))
			}
			tg.send(e, bodiesSent...)
			rs := tg.receive(e, 120)
			if len(rs) != 120 {
				t.Fatalf("received %d", len(rs))
			}
			if _, err := tg.ackAll(e, rs[:60]...); err != nil {
				t.Fatal(err)
			}
			before := tg.stats(e)
			e.restart()
			snaps := findFiles(t, mem, "/data", "snapshot")
			if len(snaps) == 0 {
				t.Fatal("no snapshot was written")
			}
			for _, p := range snaps {
				data, err := vfs.ReadFile(mem, p)
				if err != nil {
					t.Fatal(err)
				}
				data[len(data)/2] ^= 0x10
				if err := vfs.WriteFileAtomic(mem, filepath.Dir(p), filepath.Base(p), data); err != nil {
					t.Fatal(err)
				}
			}
			e.restart()
			after := tg.stats(e)
			if after.Acked != before.Acked || after.InFlight != before.InFlight || after.Depth() != before.Depth() {
				t.Fatalf("after a damaged snapshot:\n got %+v\nwant %+v", after, before)
			}
		})
	}
}

// findFiles lists the files named name under dir.
func findFiles(t *testing.T, fsys vfs.FS, dir, name string) []string {
	t.Helper()
	var out []string
	names, _ := fsys.List(dir)
	for _, n := range names {
		p := filepath.Join(dir, n)
		st, err := fsys.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.IsDir() {
			out = append(out, findFiles(t, fsys, p, name)...)
		} else if n == name {
			out = append(out, p)
		}
	}
	return out
}

// segmentOf is the first segment file of the log a target's cursor reads.
func segmentOf(t *testing.T, mem *vfs.MemFS, tg cursorTarget) string {
	t.Helper()
	root := "/data/queues"
	if tg.name == "subscription" {
		root = "/data/topics"
	}
	for _, p := range findFiles(t, mem, root, "00000000000000000000.log") {
		if !strings.Contains(p, "/journal/") {
			return p
		}
	}
	t.Fatal("no segment")
	return ""
}

// flipBatch flips one byte inside the idx'th batch of a segment.
func flipBatch(t *testing.T, mem *vfs.MemFS, path string, idx int) {
	t.Helper()
	data, err := vfs.ReadFile(mem, path)
	if err != nil {
		t.Fatal(err)
	}
	pos := int64(0)
	for range idx {
		n, err := batch.FrameSize(data[pos:])
		if err != nil {
			t.Fatal(err)
		}
		pos += n
	}
	n, err := batch.FrameSize(data[pos:])
	if err != nil {
		t.Fatal(err)
	}
	data[pos+n-2] ^= 0x20 // inside the last record
	if err := vfs.WriteFileAtomic(mem, filepath.Dir(path), filepath.Base(path), data); err != nil {
		t.Fatal(err)
	}
}

// A damaged batch costs the messages in it and nothing else, for a queue
// and a subscription alike: one in flight (its redelivery finds the record
// gone) and one in the backlog are lost and counted; every other message
// is delivered; nothing fails; a restart changes none of it.
func TestDamagedBatchCostsOnlyItsMessages(t *testing.T) {
	for _, tg := range cursorTargets {
		t.Run(tg.name, func(t *testing.T) {
			damagedBatches(t, tg, []int{2, 0}, 2) // c in the backlog, a in flight
		})
		t.Run(tg.name+"/last", func(t *testing.T) {
			// The log's last batch: nothing readable after it, and the
			// fill must move past it rather than read it forever.
			damagedBatches(t, tg, []int{3}, 1)
		})
	}
}

// damagedBatches sends a, b, c, d (a batch each), receives a, damages the
// batches idx, and checks that exactly the others are delivered.
func damagedBatches(t *testing.T, tg cursorTarget, idx []int, lost int) {
	t.Helper()
	mem := vfs.NewMem()
	e := newEnv(t, mem)
	tg.open(e, false)
	for _, b := range []string{"a", "b", "c", "d"} {
		tg.send(e, b) // one batch each
	}
	if rs := tg.receive(e, 1); len(rs) != 1 { // a, in flight
		t.Fatalf("received %d", len(rs))
	}
	if err := e.b.Close(); err != nil {
		t.Fatal(err)
	}
	seg := segmentOf(t, mem, tg)
	for _, i := range idx {
		flipBatch(t, mem, seg, i)
	}
	e.open()
	e.clock.Advance(time.Minute) // a's visibility ends
	var got int
	for range 3 {
		rs, err := tg.receiveErr(e, 10)
		if err != nil {
			t.Fatalf("receive over damaged batches: %v", err)
		}
		got += len(rs)
		if _, err := tg.ackAll(e, rs...); err != nil {
			t.Fatal(err)
		}
	}
	st := tg.stats(e)
	if got != 4-lost || st.Lost != uint64(lost) || st.Depth() != 0 {
		t.Fatalf("delivered %d, stats %+v: want %d delivered, %d lost, nothing left", got, st, 4-lost, lost)
	}
	if n := len(e.b.Corruption()); n != len(idx) {
		t.Fatalf("%d damaged batches listed, want %d", n, len(idx))
	}
	e.restart()
	if st := tg.stats(e); st.Lost != uint64(lost) || st.Depth() != 0 {
		t.Fatalf("after a restart: %+v", st)
	}
}
