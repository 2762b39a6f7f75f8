package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/txn"
)

// clusterTxnEnv drives transactions on an in-process cluster through the broker's API, as
// the Kafka front-end and a client would: coordinator calls go to the controller, produce
// to each partition's leader, both retried on the answers clients retry.
type clusterTxnEnv struct {
	t *testing.T
	c *memCluster
	// cut are nodes the test cut off the network: no client reaches them either.
	cut map[multiraft.NodeID]bool
}

func newClusterTxnEnv(t *testing.T, partitions int32) *clusterTxnEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	c := newMemCluster(t, 3)
	_, ctl := c.coordinator()
	if _, err := ctl.CreateTopic(TopicSettings{Name: "out", Partitions: partitions}); err != nil {
		t.Fatal(err)
	}
	e := &clusterTxnEnv{t: t, c: c, cut: map[multiraft.NodeID]bool{}}
	for p := range partitions {
		e.leader(p) // every partition has a leader before the first produce
	}
	return e
}

// retriable: the answers a Kafka client retries (after finding the coordinator or the
// leader again).
func retriable(err error) bool {
	return errors.Is(err, ErrNotCoordinator) || errors.Is(err, ErrCoordinatorNotAvailable) ||
		errors.Is(err, ErrConcurrentTxns) || errors.Is(err, ErrNotLeader) || errors.Is(err, ErrReplicationUnknown) ||
		errors.Is(err, ErrClosed)
}

// ctl calls f on every live node until one answers other than retriably.
func (e *clusterTxnEnv) ctl(what string, f func(b *Broker) error) error {
	e.t.Helper()
	var err error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, id := range e.c.ids {
			if b := e.c.nodes[id].b; b != nil && !e.cut[id] {
				if err = f(b); !retriable(err) {
					return err
				}
			}
		}
	}
	e.t.Fatalf("%s: no answer within 20 s: %v", what, err)
	return err
}

func (e *clusterTxnEnv) leader(p int32) *Broker {
	e.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, id := range e.c.ids {
			b := e.c.nodes[id].b
			if b == nil || e.cut[id] {
				continue
			}
			if pl, err := b.PartitionPlacement("out", p); err == nil && pl.Leader == int32(id) {
				return b
			}
		}
	}
	e.t.Fatalf("out/%d: no leader: %s", p, e.c.describe())
	return nil
}

type clusterTxnProducer struct {
	e   *clusterTxnEnv
	id  string
	pid ProducerID
	seq map[int32]int32
}

func (e *clusterTxnEnv) producer(id string) *clusterTxnProducer {
	e.t.Helper()
	p := &clusterTxnProducer{e: e, id: id, seq: map[int32]int32{}}
	err := e.ctl("init "+id, func(b *Broker) (err error) {
		p.pid, err = b.InitTransactionalProducer(id, time.Minute, TxnProducer{ID: -1, Epoch: -1})
		return err
	})
	if err != nil {
		e.t.Fatalf("init %s: %v", id, err)
	}
	return p
}

// produce adds the partitions and writes one transactional batch to each, through its
// leader; the value is "<tag>-<partition>".
func (p *clusterTxnProducer) produce(tag string, parts ...int32) error {
	p.e.t.Helper()
	var tps []TxnPartition
	for _, part := range parts {
		tps = append(tps, TxnPartition{Topic: "out", Partition: part})
	}
	err := p.e.ctl("add partitions", func(b *Broker) error {
		errs, err := b.AddPartitionsToTxn(p.id, p.pid.ID, p.pid.Epoch, tps)
		return errors.Join(append(errs, err)...)
	})
	if err != nil {
		return err
	}
	for _, part := range parts {
		raw := txnBatch(p.pid, p.seq[part], fmt.Sprintf("%s-%d", tag, part))
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			_, err = p.e.leader(part).ProduceBatches(context.Background(), "out", part, [][]byte{raw})
			if !retriable(err) || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			return err
		}
		p.seq[part]++
	}
	return nil
}

func (p *clusterTxnProducer) end(commit bool) error {
	return p.e.ctl("end", func(b *Broker) error { return b.EndTxn(p.id, p.pid.ID, p.pid.Epoch, commit) })
}

// visible is what a read_committed reader of the partition's leader sees, and its state.
func (e *clusterTxnEnv) visible(part int32) ([]string, PartitionState) {
	e.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var out []string
		var st PartitionState
		b := e.leader(part)
		err := func() error {
			for off := int64(0); ; {
				res, err := b.Fetch(context.Background(), "out", part, off, FetchOptions{})
				if err != nil {
					return err
				}
				st = res.PartitionState
				if res.Next < 0 {
					return nil
				}
				if err := eachRecord(res.Batches, func(r batch.Record) bool {
					if r.Offset >= off {
						out = append(out, string(r.Value))
					}
					return true
				}); err != nil {
					return err
				}
				off = res.Next
			}
		}()
		if err == nil {
			return out, st
		}
		if !retriable(err) || time.Now().After(deadline) {
			e.t.Fatalf("read out/%d: %v", part, err)
		}
	}
}

// settled waits until every partition's last stable offset is its high watermark (no
// transaction open) and returns what each shows.
func (e *clusterTxnEnv) settled(parts int32) [][]string {
	e.t.Helper()
	out := make([][]string, parts)
	for p := range parts {
		deadline := time.Now().Add(20 * time.Second)
		for {
			var st PartitionState
			out[p], st = e.visible(p)
			if st.LastStableOffset == st.HighWatermark {
				break
			}
			if time.Now().After(deadline) {
				e.t.Fatalf("out/%d never settled: %+v, visible %v", p, st, out[p])
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return out
}

func (e *clusterTxnEnv) controllerID() multiraft.NodeID {
	id, _ := e.c.coordinator()
	return id
}

func (e *clusterTxnEnv) describe(id string) Transaction {
	e.t.Helper()
	var got []Transaction
	if err := e.ctl("describe", func(b *Broker) (err error) {
		got, _, err = b.DescribeTransactions([]string{id})
		return err
	}); err != nil || len(got) != 1 {
		e.t.Fatalf("describe %s: %v %v", id, got, err)
	}
	return got[0]
}

// TestClusterTxnCommitAndAbort: a transaction over three partitions led by different
// nodes commits (every record visible once, on every partition) and the next aborts
// (none visible); the open transaction holds each partition's last stable offset on its
// leader; a node that is not the controller answers NOT_COORDINATOR.
func TestClusterTxnCommitAndAbort(t *testing.T) {
	e := newClusterTxnEnv(t, 3)
	leaders := map[*Broker]bool{}
	for p := range int32(3) {
		leaders[e.leader(p)] = true
	}
	t.Logf("3 partitions led by %d nodes", len(leaders))
	ctlID := e.controllerID()
	for _, id := range e.c.ids {
		if id == ctlID {
			continue
		}
		var nc *NotCoordinatorError
		if _, err := e.c.nodes[id].b.InitTransactionalProducer("etl", time.Minute, TxnProducer{ID: -1, Epoch: -1}); !errors.As(err, &nc) || nc.Coordinator != int32(ctlID) {
			t.Fatalf("init on n%d (n%d is the controller): %v", id, ctlID, err)
		}
	}
	p := e.producer("etl")
	if err := p.produce("c1", 0, 1, 2); err != nil {
		t.Fatal(err)
	}
	for part := range int32(3) {
		if got, st := e.visible(part); len(got) != 0 || st.LastStableOffset != 0 || st.HighWatermark != 1 {
			t.Fatalf("out/%d while open: visible %v, %+v", part, got, st)
		}
	}
	if err := p.end(true); err != nil {
		t.Fatal(err)
	}
	if err := p.produce("a1", 0, 1, 2); err != nil {
		t.Fatal(err)
	}
	if err := p.end(false); err != nil {
		t.Fatal(err)
	}
	if err := p.produce("c2", 0, 2); err != nil {
		t.Fatal(err)
	}
	if err := p.end(true); err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"c1-0", "c2-0"}, {"c1-1"}, {"c1-2", "c2-2"}}
	if got := e.settled(3); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("read_committed: %v, want %v", got, want)
	}
	// EndTxn answers once the decision is durable; the record of the end follows the markers.
	e.c.eventually(t, "the transaction described CompleteCommit", func() error {
		if d := e.describe("etl"); d.State != txn.CompleteCommit || d.ProducerID != p.pid.ID {
			return fmt.Errorf("described: %+v", d)
		}
		return nil
	})
}
