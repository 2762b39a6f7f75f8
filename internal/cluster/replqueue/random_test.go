package replqueue

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/sluice-mq/sluice/internal/cluster/memnet"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/queue"
)

// The randomized tests run a few seeds and a few hundred ticks each in CI; set
// SLUICE_REPLQUEUE_LONG=N for N seeds of 2,000 ticks (e.g. 200: a few minutes).
func randomRuns() (seeds int, ticks int) {
	if n, err := strconv.Atoi(os.Getenv("SLUICE_REPLQUEUE_LONG")); err == nil && n > 0 {
		return n, 2000
	}
	return 20, 600
}

// client is one client of the randomized tests: one call at a time, following hints.
type client struct {
	id       int
	at       multiraft.NodeID // where it sends next
	call     *call
	node     multiraft.NodeID // where call went
	input    mInput
	callTime int64
	since    uint64 // tick of the call
	receipts []string
}

type history struct {
	ops   []porcupine.Operation
	clock int64
	sent  map[string]bool   // bodies whose Send returned ok
	acked map[string]int64  // body -> when its Ack returned ok
	maybe map[string]bool   // bodies with an Ack of unknown outcome: they may be gone
	body  map[string]string // receipt -> body
	redel []string          // violations: acked bodies received again
}

func (h *history) now() int64 { h.clock++; return h.clock }

// runRandom drives clients and faults over a 3-node cluster and returns the history.
// Visibility vis: long (no redelivery) for the linearizability check, short for the
// redelivery checks.
func runRandom(t *testing.T, seed int64, ticks int, vis time.Duration) (*cluster, *history) {
	rng := rand.New(rand.NewSource(seed))
	c := newCluster(t, seed, 3, queue.Config{Visibility: vis})
	c.net.SetDefault(memnet.Faults{Drop: 0.03, MaxDelay: 2})
	c.elect()
	h := &history{sent: map[string]bool{}, acked: map[string]int64{}, maybe: map[string]bool{}, body: map[string]string{}}
	clients := make([]*client, 3)
	for i := range clients {
		clients[i] = &client{id: i, at: multiraft.NodeID(1 + i)}
	}
	next := 0
	for range ticks {
		c.fault(rng)
		for _, cl := range clients {
			if cl.call == nil && rng.Intn(3) == 0 {
				c.invoke(rng, h, cl, &next)
			}
		}
		c.tick()
		for _, cl := range clients {
			c.collect(h, cl)
		}
	}
	for _, cl := range clients { // what never answered is unknown
		if cl.call != nil {
			h.record(cl, mOutput{unknown: true}, math.MaxInt64)
		}
	}
	return c, h
}

// fault now and then kills or restarts a node, or partitions one off, or heals.
func (c *cluster) fault(rng *rand.Rand) {
	if rng.Intn(40) != 0 {
		return
	}
	id := c.ids[rng.Intn(len(c.ids))]
	switch k := rng.Intn(4); {
	case !c.nodes[id].up:
		c.start(id)
	case k == 0 && len(c.up()) == len(c.ids):
		c.kill(id)
	case k == 1:
		var rest []multiraft.NodeID
		for _, o := range c.ids {
			if o != id {
				rest = append(rest, o)
			}
		}
		c.net.Partition(rest, []multiraft.NodeID{id})
	default:
		c.net.Heal()
	}
}

func (c *cluster) invoke(rng *rand.Rand, h *history, cl *client, next *int) {
	var cmd Command
	var in mInput
	switch k := rng.Intn(3); {
	case k == 0 || (k == 2 && len(cl.receipts) == 0):
		*next++
		in = mInput{kind: mSend, body: fmt.Sprint("m", *next)}
		cmd = Command{Op: OpSend, Body: []byte(in.body)}
	case k == 1:
		in = mInput{kind: mReceive}
		cmd = Command{Op: OpReceive, Max: 1}
	default:
		i := rng.Intn(len(cl.receipts))
		in = mInput{kind: mAck, receipt: cl.receipts[i]}
		cl.receipts = append(cl.receipts[:i], cl.receipts[i+1:]...)
		cmd = Command{Op: OpAck, Receipt: in.receipt}
	}
	nd := c.nodes[cl.at]
	if !nd.up {
		cl.at = c.ids[rng.Intn(len(c.ids))]
		return
	}
	callTime := h.now()
	p, err := nd.q.start(cmd)
	var nl *NotLeaderError
	switch {
	case errors.As(err, &nl): // not applied: not in the history
		if nl.Leader != 0 {
			cl.at = nl.Leader
		} else {
			cl.at = c.ids[rng.Intn(len(c.ids))]
		}
		if in.kind == mAck {
			cl.receipts = append(cl.receipts, in.receipt)
		}
		return
	case err != nil:
		c.t.Fatalf("start: %v", err)
	}
	cl.call, cl.node, cl.input, cl.callTime, cl.since = p, cl.at, in, callTime, c.ticks
}

// collect records a finished call, or gives up on one that took too long (unknown).
func (c *cluster) collect(h *history, cl *client) {
	if cl.call == nil {
		return
	}
	select {
	case <-cl.call.p.Done():
	default:
		if c.ticks-cl.since > 300 {
			h.record(cl, mOutput{unknown: true}, math.MaxInt64)
		}
		return
	}
	r, err := c.nodes[cl.node].q.finish(cl.call)
	var out mOutput
	switch {
	case err == nil:
		if cl.input.kind == mReceive {
			out.empty = len(r.Deliveries) == 0
			if !out.empty {
				d := r.Deliveries[0]
				out.body, out.receipt = string(d.Body), d.Receipt
				cl.receipts = append(cl.receipts, d.Receipt)
				h.body[d.Receipt] = out.body
				if at, ok := h.acked[out.body]; ok && at < cl.callTime {
					h.redel = append(h.redel, out.body)
				}
			}
		}
	case errors.Is(err, multiraft.ErrProposalDropped): // not applied: not in the history
		cl.call = nil
		return
	case errors.Is(err, queue.ErrReceiptStale):
		out.stale = true
	case errors.Is(err, ErrOutcomeUnknown):
		h.record(cl, mOutput{unknown: true}, math.MaxInt64)
		return
	default:
		c.t.Fatalf("%+v: %v", cl.input, err)
	}
	ret := h.now()
	switch {
	case cl.input.kind == mSend && err == nil:
		h.sent[cl.input.body] = true
	case cl.input.kind == mAck && err == nil:
		h.acked[h.body[cl.input.receipt]] = ret
	}
	h.record(cl, out, ret)
}

func (h *history) record(cl *client, out mOutput, ret int64) {
	if out.unknown && cl.input.kind == mAck {
		h.maybe[h.body[cl.input.receipt]] = true
	}
	h.ops = append(h.ops, porcupine.Operation{ClientId: cl.id, Input: cl.input, Call: cl.callTime, Output: out, Return: ret})
	cl.call = nil
}

// TestRandomizedLinearizable: histories of sends, receives and acks through kills,
// partitions and lossy links are linearizable against the sequential queue (model_test.go).
func TestRandomizedLinearizable(t *testing.T) {
	seeds, ticks := randomRuns()
	snaps := uint64(0)
	defer func() {
		// followers that fell behind were sent snapshots: Restore is on the tested path
		if snaps == 0 && !t.Failed() {
			t.Error("no snapshot was sent in any run")
		}
	}()
	for seed := int64(1); seed <= int64(seeds); seed++ {
		c, h := runRandom(t, seed, ticks, time.Hour)
		for _, nd := range c.up() {
			snaps += nd.host.Stats().SnapsSent
		}
		res := porcupine.CheckOperationsTimeout(queueModel, h.ops, 30*time.Second)
		unknown := 0
		for _, op := range h.ops {
			if op.Output.(mOutput).unknown {
				unknown++
			}
		}
		t.Logf("seed %d: %d operations (%d unknown): %v", seed, len(h.ops), unknown, res)
		if res == porcupine.Illegal {
			for _, op := range h.ops {
				t.Logf("  [%d,%d] c%d %s", op.Call, op.Return, op.ClientId, queueModel.DescribeOperation(op.Input, op.Output))
			}
			t.Fatalf("seed %d: history not linearizable", seed)
		}
	}
}

// TestRandomizedNoRedeliveryAfterAck: with a visibility (1 s = 100 ticks) short enough
// that receipts expire and messages come back, through the same faults: no message is
// received after its Ack returned, and at the end (healed, every node up, the clock past
// every deadline) every message whose Send returned is either acked or delivered again:
// nothing acknowledged is lost, nothing acked comes back.
func TestRandomizedNoRedeliveryAfterAck(t *testing.T) {
	seeds, ticks := randomRuns()
	for seed := int64(1); seed <= int64(seeds); seed++ {
		c, h := runRandom(t, seed, ticks, time.Second)
		if len(h.redel) > 0 {
			t.Fatalf("seed %d: acked messages received again: %v", seed, h.redel)
		}
		c.net.Heal()
		c.net.SetDefault(memnet.Faults{})
		for _, id := range c.ids {
			if !c.nodes[id].up {
				c.start(id)
			}
		}
		c.advance += time.Hour
		drained := map[string]bool{}
		for range 10000 {
			r, err := c.exec(0, Command{Op: OpReceive, Max: 10})
			if err != nil {
				// Leadership may still move after the restarts: a dropped Receive did
				// nothing, an unknown one hid what it took until its visibility ends.
				if !errors.Is(err, multiraft.ErrProposalDropped) && !errors.Is(err, ErrOutcomeUnknown) {
					t.Fatalf("seed %d: drain: %v", seed, err)
				}
				c.advance += time.Hour
				continue
			}
			if len(r.Deliveries) == 0 {
				break
			}
			for _, d := range r.Deliveries {
				b := string(d.Body)
				if _, ok := h.acked[b]; ok {
					t.Fatalf("seed %d: %s acked, then delivered in the drain", seed, b)
				}
				drained[b] = true
				// An ack that fails here only means the message is drained again.
				_, _ = c.exec(0, Command{Op: OpAck, Receipt: d.Receipt})
			}
		}
		for b := range h.sent {
			if _, ok := h.acked[b]; !ok && !drained[b] && !h.maybe[b] {
				for _, op := range h.ops {
					in, out := op.Input.(mInput), op.Output.(mOutput)
					if in.body == b || out.body == b || h.body[in.receipt] == b {
						t.Logf("  [%d,%d] c%d %s", op.Call, op.Return, op.ClientId, queueModel.DescribeOperation(op.Input, op.Output))
					}
				}
				l := c.elect()
				t.Logf("leader n%d: %+v", l, c.nodes[l].sm.Stats())
				t.Fatalf("seed %d: %s was sent (acknowledged to its client) and is gone", seed, b)
			}
		}
		if err := c.replicasAgree(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		t.Logf("seed %d: %d sent, %d acked in the run, %d drained", seed, len(h.sent), len(h.acked), len(drained))
	}
}
