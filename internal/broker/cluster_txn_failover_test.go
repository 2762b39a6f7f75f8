package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/group"
	"github.com/sluice-mq/sluice/internal/txn"
)

// TestClusterTxnControllerFailsBeforeMarkers: the controller accepts EndTxn, commits its
// decision, and loses power before any marker is written. The next controller finishes
// the transaction with the same decision (a commit shows every record once on every
// partition, an abort none); the transactional id keeps its producer id, a re-init
// fences the old epoch (its produce and its coordinator calls are refused), and the node
// that lost power comes back with the records.
func TestClusterTxnControllerFailsBeforeMarkers(t *testing.T) {
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprintf("commit=%v", commit), func(t *testing.T) {
			e := newClusterTxnEnv(t, 3)
			// More transactional ids than the cluster's SnapshotEntries (25): the metadata
			// group snapshots with their records, and the node restarted below restores
			// one and applies the log after it.
			for i := range 30 {
				e.producer(fmt.Sprintf("other-%d", i))
			}
			p := e.producer("etl")
			if err := p.produce("t1", 0, 1, 2); err != nil {
				t.Fatal(err)
			}
			ctlID, ctl := e.c.coordinator()
			entered, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			hook := func() {
				once.Do(func() { close(entered) })
				<-release
			}
			ctl.cluster.txn.beforeMarkers.Store(&hook)
			var releaseOnce sync.Once
			t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
			go func() { _ = ctl.EndTxn(p.id, p.pid.ID, p.pid.Epoch, commit) }()
			select {
			case <-entered:
			case <-time.After(20 * time.Second):
				t.Fatal("the completion never started")
			}
			e.c.crash(ctlID, true)
			releaseOnce.Do(func() { close(release) }) // the zombie goes on, cut off from the others
			if newID := e.controllerID(); newID == ctlID {
				t.Fatalf("n%d still the controller", newID)
			}
			var want [][]string
			for part := range 3 {
				if commit {
					want = append(want, []string{fmt.Sprintf("t1-%d", part)})
				} else {
					want = append(want, nil)
				}
			}
			if got := e.settled(3); !slices.EqualFunc(got, want, slices.Equal) {
				t.Fatalf("read_committed after the failover: %v, want %v", got, want)
			}
			wantState := txn.CompleteAbort
			if commit {
				wantState = txn.CompleteCommit
			}
			// The markers are all written (settled); the coordinator's record of the end
			// commits just after, as Kafka's CompleteAbort/CompleteCommit follows the markers.
			e.c.eventually(t, fmt.Sprintf("the new controller describes %v", wantState), func() error {
				if d := e.describe("etl"); d.State != wantState || d.ProducerID != p.pid.ID || d.Epoch != p.pid.Epoch {
					return fmt.Errorf("it describes %+v, want %v of producer %+v", d, wantState, p.pid)
				}
				return nil
			})

			// A new instance of the producer fences the old one.
			zombie := *p
			p = e.producer("etl")
			if p.pid.ID != zombie.pid.ID || p.pid.Epoch != zombie.pid.Epoch+1 {
				t.Fatalf("re-init after the failover: %+v, was %+v", p.pid, zombie.pid)
			}
			if err := zombie.produce("z", 0); !errors.Is(err, ErrTxnFenced) {
				t.Fatalf("the zombie's AddPartitionsToTxn: %v, want fenced", err)
			}
			zraw := txnBatch(zombie.pid, zombie.seq[1], "z")
			if _, err := e.leader(1).ProduceBatches(context.Background(), "out", 1, [][]byte{zraw}); !errors.Is(err, ErrTxnFenced) && !errors.Is(err, ErrInvalidTxnState) {
				t.Fatalf("the zombie's produce: %v, want refused", err)
			}
			if err := p.produce("t2", 1); err != nil {
				t.Fatal(err)
			}
			if err := p.end(true); err != nil {
				t.Fatal(err)
			}
			got := e.settled(3)
			if !slices.Contains(got[1], "t2-1") || slices.Contains(got[1], "z-1") || slices.Contains(got[0], "z-0") {
				t.Fatalf("after the new instance's commit: %v", got)
			}

			// The node that lost power restarts from its snapshot and log, and holds the
			// record as the controller wrote it.
			e.c.start(ctlID)
			m := e.c.nodes[ctlID].b.cluster.meta
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if r, ok := m.State().Txns["etl"]; ok && len(m.State().Txns) == 31 {
					if tx, err := txn.DecodeTxn(r.Record); err == nil && tx.Epoch == p.pid.Epoch && tx.State == txn.CompleteCommit {
						break
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("restarted n%d holds %+v", ctlID, m.State().Txns)
				}
			}
		})
	}
}

// TestClusterTxnPartitionLeaderFails: a partition's leader loses power while a
// transaction is open there. Its new leader derives the open transaction from the
// replicated log (its last stable offset stays below the record), and the commit's
// marker reaches it: every record visible exactly once.
func TestClusterTxnPartitionLeaderFails(t *testing.T) {
	e := newClusterTxnEnv(t, 3)
	p := e.producer("etl")
	if err := p.produce("t1", 0, 1, 2); err != nil {
		t.Fatal(err)
	}
	ctlID := e.controllerID()
	victim, part := ctlID, int32(-1)
	for q := range int32(3) {
		if id := e.leader(q).cluster.node; id != ctlID {
			victim, part = id, q
			break
		}
	}
	if part < 0 {
		t.Skip("the controller leads every partition")
	}
	e.c.crash(victim, true)
	for deadline := time.Now().Add(20 * time.Second); e.leader(part).cluster.node == victim; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("out/%d: no new leader", part)
		}
	}
	if got, st := e.visible(part); len(got) != 0 || st.LastStableOffset != 0 || st.HighWatermark != 1 {
		t.Fatalf("out/%d on its new leader while open: visible %v, %+v", part, got, st)
	}
	if err := p.end(true); err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"t1-0"}, {"t1-1"}, {"t1-2"}}
	if got := e.settled(3); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("read_committed: %v, want %v", got, want)
	}
	e.c.start(victim)
	if err := p.produce("t2", 0, 1, 2); err != nil {
		t.Fatal(err)
	}
	if err := p.end(false); err != nil {
		t.Fatal(err)
	}
	if got := e.settled(3); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("read_committed after an abort: %v, want %v", got, want)
	}
}

// TestClusterTxnOffsetsOnlyOnCommit: consume-transform-produce. Offsets committed in a
// transaction (AddOffsetsToTxn, TxnOffsetCommit) reach the group only when it commits,
// and then on every node.
func TestClusterTxnOffsetsOnlyOnCommit(t *testing.T) {
	e := newClusterTxnEnv(t, 1)
	p := e.producer("etl")
	offsets := func(off int64) error {
		return e.ctl("offsets", func(b *Broker) error {
			if err := b.AddOffsetsToTxn(p.id, p.pid.ID, p.pid.Epoch, "g"); err != nil {
				return err
			}
			return b.TxnOffsetCommit(p.id, p.pid.ID, p.pid.Epoch, group.CommitRequest{Group: "g", Generation: -1,
				Offsets: []group.OffsetCommit{{Topic: "out", Partition: 0, Offset: off, LeaderEpoch: -1}}}, false)
		})
	}
	for _, step := range []struct {
		off    int64
		commit bool
		want   int64 // -1: none
	}{{10, false, -1}, {20, true, 20}, {30, false, 20}} {
		if err := p.produce(fmt.Sprint(step.off), 0); err != nil {
			t.Fatal(err)
		}
		if err := offsets(step.off); err != nil {
			t.Fatal(err)
		}
		if err := p.end(step.commit); err != nil {
			t.Fatal(err)
		}
		for _, id := range e.c.ids {
			b := e.c.nodes[id].b
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				got, ok := b.FetchOffset("g", "out", 0)
				if ok && got.Offset == step.want || !ok && step.want < 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after offset %d (commit %v): n%d has %+v %v, want %d", step.off, step.commit, id, got, ok, step.want)
				}
			}
		}
	}
}
