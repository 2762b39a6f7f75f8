package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/testproc"
)

// TestMembershipUnderLoad (docs/cluster.md, "Add a node", "Remove a node", "Replace a node
// that lost its disk"): three nodes under load — an idempotent acks=all franz-go producer
// on a topic of one partition, an aws-sdk-go-v2 producer and consumer on a queue — then a
// fourth node joins (`--cluster-join`, `sluice cluster add-node`) and a queue replica
// moves onto it; a node is removed (`sluice cluster remove-node`), its replicas (the
// queue's and an empty partition's) moving off it; the removed node's data directory is
// wiped and it comes back under a new id through the documented path while its old id is
// refused. The checkers (TestLeaderKilledUnderLoad's and TestQueueLeaderKilledUnderLoad's)
// find every acknowledged record and message, and no message delivered after its delete
// was answered.
func TestMembershipUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("runs four sluice processes")
	}
	c := startCluster(t, 3)
	for i := range c.procs {
		c.procs[i].Addr("sqs")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c.awaitStatus(ctx, t, 1, "three nodes registered", func(st broker.ClusterStatus) bool { return len(st.Nodes) == 3 })
	adm := kadm.NewClient(c.client())
	createTopic(ctx, t, adm, "orders", 1, 2) // on two of the three nodes
	createTopic(ctx, t, adm, "empty", 1, 3)
	md, err := adm.Metadata(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	orders := md.Topics["orders"].Partitions[0].Replicas
	// The node to remove is a replica of orders, which holds records by then: its move
	// seeds a new replica by a pull of the records from a peer (docs/cluster.md,
	// "Snapshot, compaction and seeding a replica") while the producer goes on.
	gone := int(orders[1])
	via := int(orders[0]) // the SQS clients' node: it stays
	t.Logf("orders/0 on %v; node %d will be removed; SQS clients through node %d", orders, gone, via)

	const visibility = 10
	cl := c.sqsClient(ctx, t, via)
	qurl := createQueue(ctx, t, cl, "jobs", visibility)
	ck := newQueueChecker()
	stopQ, consumeDone := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); ck.produce(ctx, cl, qurl, stopQ) }()
	go func() { defer wg.Done(); ck.consume(ctx, cl, qurl, visibility, consumeDone) }()
	kp := startKafkaLoad(ctx, c, "orders")

	// A fourth node joins; the rebalance moves replicas onto it (queues and partitions,
	// orders among them with its records, while both loads run) until the counts even out.
	n4 := c.join(t)
	// A new id at a member's address is refused: its own (via's) and another's.
	for _, at := range []int{via, via%3 + 1} {
		if out, err := c.cliErr(via, "cluster", "add-node", fmt.Sprintf("%d=%s", n4, c.raft[at-1])); err == nil ||
			!strings.Contains(out, "an address of its own") {
			t.Fatalf("adding node %d at node %d's address through node %d: %v\n%s", n4, at, via, err, out)
		}
	}
	added := time.Now()
	c.cli(t, via, "cluster", "add-node", fmt.Sprintf("%d=%s", n4, c.raft[n4-1]))
	st := c.awaitStatus(ctx, t, n4, "node 4 in the metadata group holding replicas", func(st broker.ClusterStatus) bool {
		m := st.Membership
		return (slices.Contains(m.MetaLearners, int32(n4)) || slices.Contains(m.MetaVoters, int32(n4))) &&
			len(st.Queues)+len(st.Partitions) > 0 && len(m.Moves) == 0
	})
	var held []string
	for _, p := range st.Partitions {
		held = append(held, fmt.Sprintf("%s/%d (applied %d)", p.Topic, p.Partition, p.Applied))
	}
	for _, q := range st.Queues {
		held = append(held, "queue "+q.Queue)
	}
	t.Logf("node 4 joined: metadata voters %v learners %v; holds %v, %v after add-node", st.Membership.MetaVoters,
		st.Membership.MetaLearners, held, time.Since(added).Round(10*time.Millisecond))

	// Node `gone` is removed: the command waits until it holds nothing.
	removing := time.Now()
	out := c.cli(t, via, "cluster", "remove-node", strconv.Itoa(gone), "--wait", "60s")
	t.Logf("remove-node (%v): %s", time.Since(removing).Round(10*time.Millisecond), strings.TrimSpace(out))
	st = c.awaitStatus(ctx, t, via, "the removed node out of everything", func(st broker.ClusterStatus) bool {
		m := st.Membership
		return !slices.Contains(m.MetaVoters, int32(gone)) && !slices.Contains(m.MetaLearners, int32(gone)) &&
			len(m.Moves) == 0 && slices.Contains(m.Removed, int32(gone))
	})
	c.procs[gone-1].Stop()

	// The removed node lost its disk: it comes back under a new id (ids are never
	// reused, so no replica of it ever votes with state it forgot), and its old id is
	// refused.
	if out, err := c.cliErr(via, "cluster", "add-node", fmt.Sprintf("%d=%s", gone, c.raft[gone-1])); err == nil ||
		!strings.Contains(out, "removed") {
		t.Fatalf("re-adding removed node %d: %v\n%s", gone, err, out)
	}
	if err := os.RemoveAll(c.dirs[gone-1]); err != nil {
		t.Fatal(err)
	}
	// Started on the empty disk under its old id, it is never admitted: no group takes it
	// back, so it never votes with the state it forgot.
	c.flags = append(slices.Clone(c.flags), "--cluster-join")
	c.start(gone)
	c.procs[gone-1].Addr("kafka")
	time.Sleep(3 * time.Second)
	st = c.awaitStatus(ctx, t, via, "the status", func(broker.ClusterStatus) bool { return true })
	if m := st.Membership; slices.Contains(m.MetaVoters, int32(gone)) || slices.Contains(m.MetaLearners, int32(gone)) {
		t.Fatalf("node %d, removed, restarted on an empty disk is a member again: %+v", gone, m)
	}
	for _, n := range st.Nodes {
		if int(n.ID) == gone {
			t.Fatalf("node %d, removed, registered again: %+v", gone, st.Nodes)
		}
	}
	if !strings.Contains(c.procs[gone-1].Logs(), "refused") {
		t.Logf("node %d's logs do not show a refused connection", gone)
	}
	c.procs[gone-1].Stop()
	if err := os.RemoveAll(c.dirs[gone-1]); err != nil {
		t.Fatal(err)
	}
	n5 := c.join(t)
	c.dirs[n5-1] = c.dirs[gone-1] // the same (wiped) data directory, a new id
	c.procs[n5-1].Stop()
	c.start(n5)
	c.cli(t, via, "cluster", "add-node", fmt.Sprintf("%d=%s", n5, c.raft[n5-1]))
	c.awaitStatus(ctx, t, n5, "the replacement in the metadata group", func(st broker.ClusterStatus) bool {
		m := st.Membership
		return slices.Contains(m.MetaLearners, int32(n5)) || slices.Contains(m.MetaVoters, int32(n5))
	})

	time.Sleep(time.Second)
	close(stopQ)
	acked := kp.stop()
	drain := time.Now().Add(time.Duration(visibility)*time.Second + 20*time.Second)
	for !ck.drained() && time.Now().Before(drain) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	close(consumeDone)
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("ran out of time: %v", ctx.Err())
	}
	ck.report(t, nil)
	t.Logf("kafka: %d records acknowledged, %d produce errors", len(acked[0]), kp.failed.Load())
	checkPartitions(ctx, t, c, "orders", acked)
}

// join starts one more node, empty, with --cluster-join and every node so far as its
// peers, and returns its id. `sluice cluster add-node` admits it.
func (c *cluster) join(t *testing.T) int {
	id := len(c.procs) + 1
	c.dirs = append(c.dirs, filepath.Join(t.TempDir(), fmt.Sprintf("n%d", id)))
	c.raft = append(c.raft, freeAddr(t))
	c.kafka = append(c.kafka, freeAddr(t))
	c.sqs = append(c.sqs, freeAddr(t))
	c.peers += fmt.Sprintf(",%d=%s", id, c.raft[id-1])
	c.procs = append(c.procs, nil)
	c.flags = append(slices.Clone(c.flags), "--cluster-join")
	c.start(id)
	c.procs[id-1].Addr("kafka")
	return id
}

// awaitStatus polls `sluice cluster status -o json` on node id until ok holds.
func (c *cluster) awaitStatus(ctx context.Context, t *testing.T, id int, what string, ok func(broker.ClusterStatus) bool) broker.ClusterStatus {
	t.Helper()
	var st broker.ClusterStatus
	for {
		out, err := c.cliErr(id, "cluster", "status", "-o", "json")
		st = broker.ClusterStatus{} // omitted fields must not keep an earlier answer's values
		if err == nil && json.Unmarshal([]byte(out), &st) == nil && ok(st) {
			return st
		}
		if ctx.Err() != nil {
			for i, p := range c.procs {
				if p == nil {
					continue
				}
				var keep []string
				for _, l := range strings.Split(p.Logs(), "\n") {
					if strings.Contains(l, "cluster:") {
						keep = append(keep, l)
					}
				}
				t.Logf("node %d cluster logs (last 40):\n%s", i+1, strings.Join(keep[max(0, len(keep)-40):], "\n"))
			}
			for i := range c.procs {
				if c.procs[i] != nil {
					o, _ := c.cliErr(i+1, "cluster", "status")
					t.Logf("status of node %d:\n%s", i+1, o)
				}
			}
			c.logStacks(t, "broker.(*clusterRT)")
			t.Fatalf("%s: never seen from node %d; last status %+v (%v)", what, id, st, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// logStacks ends every running node with SIGQUIT and logs its goroutines whose stacks
// mention any of frames: what a node that stopped making progress waits on. For a test
// about to fail.
func (c *cluster) logStacks(t *testing.T, frames ...string) {
	t.Helper()
	for i, p := range c.procs {
		if p == nil {
			continue
		}
		if g := testproc.Goroutines(p.Stacks(), frames...); g != "" {
			t.Logf("node %d goroutines in %v:\n%s", i+1, frames, g)
		}
	}
}

// cliErr runs the sluice CLI against node id's native API.
func (c *cluster) cliErr(id int, args ...string) (string, error) {
	server := "http://" + c.procs[id-1].Addr("http")
	out, err := exec.Command(c.bin, append(args, "--server", server)...).CombinedOutput()
	return string(out), err
}

// kafkaLoad is an idempotent acks=all producer of ascending values to partition 0.
type kafkaLoad struct {
	mu      sync.Mutex
	acked   []int
	failed  atomic.Int64
	done    chan struct{}
	stopped chan struct{}
}

func startKafkaLoad(ctx context.Context, c *cluster, topic string) *kafkaLoad {
	k := &kafkaLoad{done: make(chan struct{}), stopped: make(chan struct{})}
	prod := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(time.Millisecond))
	go func() {
		defer close(k.stopped)
		next := 0
		for ctx.Err() == nil {
			select {
			case <-k.done:
				return
			default:
			}
			var recs []*kgo.Record
			for range 10 {
				recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(next))})
				next++
			}
			res := prod.ProduceSync(ctx, recs...)
			k.mu.Lock()
			for _, r := range res {
				if r.Err != nil {
					k.failed.Add(1)
					continue
				}
				v, _ := strconv.Atoi(string(r.Record.Value))
				k.acked = append(k.acked, v)
			}
			k.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return k
}

func (k *kafkaLoad) stop() [][]int {
	close(k.done)
	<-k.stopped
	k.mu.Lock()
	defer k.mu.Unlock()
	return [][]int{slices.Clone(k.acked)}
}
