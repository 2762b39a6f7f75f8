package e2e

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/cluster/faultproxy"
)

// TestOffsetsLinearizableUnderPartition: the Kafka offset operations of one consumer group
// through a 3-node cluster whose controller (the groups' coordinator) is cut off from both
// followers for SLUICE_CLUSTER_PARTITION_SECS (CI: 4) and healed. Three clients, each
// starting on its own node and moving to the next one when answered NOT_COORDINATOR (raw
// requests to one node, no client retries), make one call at a time: OffsetCommit of a
// value nobody committed before, or OffsetFetch, of one partition.
// The history is checked with porcupine against a register (offsetsModel): a fetch
// answers the last commit that took effect. A commit answered with an error or never
// answered has an unknown outcome; a call answered NOT_COORDINATOR did nothing (the node
// is not the controller) and is left out; so is a fetch answered with an error. A
// coordinator that acknowledged a commit without a quorum, or answered a fetch from a
// stale term after a new controller took commits, makes the history illegal.
func TestOffsetsLinearizableUnderPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three sluice processes")
	}
	hold := time.Duration(envInt("SLUICE_CLUSTER_PARTITION_SECS", 4)) * time.Second
	c := startProxiedCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second+hold)
	defer cancel()
	adm := kadm.NewClient(c.client())
	const topic, group = "lin-offsets", "lin-group"
	createTopic(ctx, t, adm, topic, 1, 3)
	commitStart(ctx, t, adm, group, topic, 1) // the register starts at 0
	old := c.controller(ctx)
	if old == 0 {
		t.Fatal("no controller")
	}

	h := &oHistory{start: time.Now(), topicID: topicIDOf(ctx, t, adm, topic)}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var nodes []*kgo.Broker // one connection per node, no retries
	for id := 1; id <= 3; id++ {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.kafka[id-1]))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		nodes = append(nodes, cl.SeedBrokers()[0])
	}
	for id := 1; id <= 3; id++ {
		wg.Add(1)
		go func() { defer wg.Done(); h.run(ctx, id, nodes, topic, group, stop) }()
	}
	time.Sleep(2 * time.Second)
	c.isolate(old, faultproxy.Cut)
	t.Logf("node %d (the controller) cut off from both followers", old)
	time.Sleep(hold)
	c.isolate(old, faultproxy.Pass)
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()

	ops := h.operations()
	commits, unknown := 0, 0
	for _, op := range ops {
		if op.Input.(oInput).commit {
			commits++
		}
		if op.Output.(oOutput).unknown {
			unknown++
		}
	}
	res, info := porcupine.CheckOperationsVerbose(offsetsModel, ops, 20*time.Second)
	t.Logf("%d operations (%d commits, %d unknown, %d NOT_COORDINATOR left out): %v",
		len(ops), commits, unknown, h.notCoordinator, res)
	switch res {
	case porcupine.Illegal:
		if path := os.Getenv("SLUICE_PORCUPINE_HTML"); path != "" {
			if err := porcupine.VisualizePath(offsetsModel, info, path); err != nil {
				t.Log(err)
			}
		}
		for _, op := range ops[:min(len(ops), 400)] {
			t.Logf("  [%d, %d] client %d: %s", op.Call, op.Return, op.ClientId, offsetsModel.DescribeOperation(op.Input, op.Output))
		}
		t.Errorf("the group's offset history is not linearizable (SLUICE_PORCUPINE_HTML=file.html draws it)")
	case porcupine.Unknown:
		t.Logf("the check timed out: the history is neither proved nor refuted")
	}
	if commits-unknown < 10 {
		t.Errorf("only %d commits answered: the test checked little", commits-unknown)
	}
}

type oInput struct {
	commit bool
	value  int64 // commit: the offset committed
}

type oOutput struct {
	unknown bool
	value   int64 // fetch: the offset answered
}

// offsetsModel is one committed offset: a register.
var offsetsModel = porcupine.Model{
	Init: func() any { return int64(0) },
	Step: func(state, input, output any) (bool, any) {
		in, out, cur := input.(oInput), output.(oOutput), state.(int64)
		if in.commit {
			return true, in.value
		}
		return out.unknown || out.value == cur, cur
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(oInput), output.(oOutput)
		switch {
		case in.commit && out.unknown:
			return fmt.Sprintf("commit %d -> ?", in.value)
		case in.commit:
			return fmt.Sprintf("commit %d", in.value)
		}
		return fmt.Sprintf("fetch -> %d", out.value)
	},
}

// oHistory is every client's operations; a client whose commit had an unknown outcome goes
// on as a new porcupine client (its open call never returns).
type oHistory struct {
	start          time.Time
	mu             sync.Mutex
	ops            []porcupine.Operation
	nextID         int
	notCoordinator int
	topicID        [16]byte // OffsetCommit and OffsetFetch v10 name topics by id only
}

func (h *oHistory) now() int64 { return int64(time.Since(h.start)) }

func (h *oHistory) add(client int, in oInput, out oOutput, call, ret int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret})
}

func (h *oHistory) operations() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]porcupine.Operation(nil), h.ops...)
}

func (h *oHistory) newClient() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nextID++
	return h.nextID
}

func (h *oHistory) skipped() {
	h.mu.Lock()
	h.notCoordinator++
	h.mu.Unlock()
}

// run is client id until stop: half commits, half fetches, to one node at a time, the next
// one after a NOT_COORDINATOR.
func (h *oHistory) run(ctx context.Context, id int, nodes []*kgo.Broker, topic, group string, stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(uint64(id), 15))
	client := h.newClient()
	at := id - 1
	for n := 1; ; n++ {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		octx, cancel := context.WithTimeout(ctx, 2*time.Second)
		call := h.now()
		in := oInput{commit: rng.IntN(2) == 0, value: int64(id)*1_000_000 + int64(n)}
		var code int16
		var got int64
		var err error
		if in.commit {
			code, err = commitOne(octx, nodes[at], group, topic, h.topicID, in.value)
		} else {
			got, code, err = fetchOne(octx, nodes[at], group, topic, h.topicID)
		}
		cancel()
		switch {
		case err == nil && code == 0:
			h.add(client, in, oOutput{value: got}, call, h.now())
			time.Sleep(20 * time.Millisecond)
		case err == nil && code == kerr.NotCoordinator.Code:
			// Nothing done: this node is not the controller. Try the next one.
			h.skipped()
			at = (at + 1) % len(nodes)
			time.Sleep(20 * time.Millisecond)
		case err == nil && !in.commit:
			time.Sleep(100 * time.Millisecond) // a read with no answer: no constraint
		default:
			h.add(client, in, oOutput{unknown: true}, call, math.MaxInt64)
			client = h.newClient()
			time.Sleep(200 * time.Millisecond) // every unknown outcome widens the search
		}
	}
}

// commitOne commits value as the group's offset of partition 0 (a standalone commit:
// no member, generation -1), through b only.
func commitOne(ctx context.Context, b *kgo.Broker, group, topic string, id [16]byte, value int64) (int16, error) {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = 0, value, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kr, err := b.Request(ctx, req)
	if err != nil {
		return 0, err
	}
	resp := kr.(*kmsg.OffsetCommitResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("commit answered %d topics", len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0].ErrorCode, nil
}

// fetchOne fetches the group's offset of partition 0 through b only.
func fetchOne(ctx context.Context, b *kgo.Broker, group, topic string, id [16]byte) (int64, int16, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	// Both shapes: before v8 the group is top level, from v8 a list of groups (the
	// version is what the client and the node negotiate).
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	req.Topics = append(req.Topics, rt)
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	gt := kmsg.NewOffsetFetchRequestGroupTopic()
	gt.Topic, gt.TopicID, gt.Partitions = topic, id, []int32{0}
	rg.Topics = append(rg.Topics, gt)
	req.Groups = append(req.Groups, rg)
	kr, err := b.Request(ctx, req)
	if err != nil {
		return 0, 0, err
	}
	resp := kr.(*kmsg.OffsetFetchResponse)
	if resp.ErrorCode != 0 {
		return 0, resp.ErrorCode, nil
	}
	for _, g := range resp.Groups { // v8+: the answer is per group
		if g.ErrorCode != 0 {
			return 0, g.ErrorCode, nil
		}
		for _, tp := range g.Topics {
			for _, p := range tp.Partitions {
				return p.Offset, p.ErrorCode, nil
			}
		}
	}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			return p.Offset, p.ErrorCode, nil
		}
	}
	return 0, 0, fmt.Errorf("fetch answered no partition")
}

// topicIDOf is the Kafka topic id of topic, as Metadata answers it.
func topicIDOf(ctx context.Context, t *testing.T, adm *kadm.Client, topic string) [16]byte {
	t.Helper()
	td, err := adm.ListTopics(ctx, topic)
	if err != nil || td[topic].Err != nil {
		t.Fatalf("topic id of %s: %v %v", topic, err, td[topic].Err)
	}
	return td[topic].ID
}
