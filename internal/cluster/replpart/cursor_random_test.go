package replpart

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// TestRandomizedCursorNoRedeliveryAfterAck: seeded schedules of produces, receives (a 1 s
// visibility: leases run out and records come back) and acks through random nodes of a
// subscription's cursor in the partition's group, with kills (the local log crashed to its
// checkpoint), restarts, partitions and heals, and the Raft log compacted behind a snapshot
// every 5 entries (followers are seeded by snapshots that carry the cursor). Checked:
//   - no record is delivered by a Receive applied after an Ack of it that returned (by log
//     index: what a client saw acked is never delivered again, across any failover);
//   - at the end (healed, all up, an hour on) draining the subscription on the leader
//     delivers every stored record not acked (by an Ack that answered, or one whose outcome
//     was unknown), and none that an Ack answered;
//   - every replica holds the same cursor, byte for byte.
//
// Short form 20 seeds × 600 steps; SLUICE_REPLPART_SEEDS and SLUICE_REPLPART_STEPS for more.
func TestRandomizedCursorNoRedeliveryAfterAck(t *testing.T) {
	seeds, steps := envInt("SLUICE_REPLPART_SEEDS", 20), envInt("SLUICE_REPLPART_STEPS", 600)
	var snaps, acks, redeliveries int
	for seed := range seeds {
		s, a, r := randomCursorRun(t, int64(seed), steps)
		snaps, acks, redeliveries = snaps+s, acks+a, redeliveries+r
	}
	t.Logf("%d seeds × %d steps: %d snapshots sent, %d acks answered, %d redeliveries", seeds, steps, snaps, acks, redeliveries)
	if snaps == 0 || acks == 0 || redeliveries == 0 {
		t.Fatalf("%d snapshots, %d acks, %d redeliveries: the schedules tested nothing", snaps, acks, redeliveries)
	}
}

type cursorCall struct {
	at   multiraft.NodeID
	cl   *call
	kind string // "append", "receive", "ack"
	off  int64  // ack: the offset its receipt names
}

type event struct {
	index uint64
	off   int64
}

func randomCursorRun(t *testing.T, seed int64, steps int) (snaps, nacks, redeliveries int) {
	rng := rand.New(rand.NewPCG(uint64(seed), 11))
	c := newCluster(t, seed, 3, chunked(30), func(c *cluster) {
		c.cfg.SnapshotEntries = 5
		c.tolerateNoSource = true
	})
	create := createAt(testSub, true)
	create.Config.Queue.Visibility = time.Second
	if _, err := c.cursorAt(c.elect(), create); err != nil {
		t.Fatal(err)
	}
	stored := map[int64]bool{}     // offsets an Append answered
	receipts := map[string]int64{} // receipts handed out, not yet acked
	var acked, delivered []event
	seen := map[int64]int{}
	var pending []cursorCall
	maybeAcked := map[int64]bool{}
	settle := func() {
		kept := pending[:0]
		for _, f := range pending {
			select {
			case <-f.cl.p.Done():
			default:
				kept = append(kept, f)
				continue
			}
			index, _ := f.cl.p.Result()
			switch f.kind {
			case "append":
				if rs, err := c.nodes[f.at].part.finish(f.cl); err == nil {
					stored[rs[0].Base] = true
				}
			default:
				r, err := c.nodes[f.at].part.finishCursor(f.cl)
				if err != nil && f.kind == "ack" {
					maybeAcked[f.off] = true // outcome unknown: it may be committed
				}
				if err != nil || r.Err != nil {
					continue
				}
				if f.kind == "ack" {
					acked = append(acked, event{index, f.off})
					nacks++
				}
				for _, d := range r.Deliveries {
					delivered = append(delivered, event{index, d.Offset})
					receipts[d.Receipt] = d.Offset
					if seen[d.Offset]++; seen[d.Offset] > 1 {
						redeliveries++
					}
				}
			}
		}
		pending = kept
	}
	n := 0
	for range steps {
		up := c.up()
		nd := up[rng.IntN(len(up))]
		if l := c.leader(); l != 0 && rng.IntN(5) > 0 { // mostly the leader: calls elsewhere are NOT_LEADER
			nd = c.nodes[l]
		}
		switch p := rng.IntN(100); {
		case p < 30:
			n++
			if cl, err := nd.part.start([][]byte{[]byte(fmt.Sprintf("v%05d", n))}); err == nil {
				pending = append(pending, cursorCall{at: nd.id, cl: cl, kind: "append"})
			}
		case p < 42:
			if cl, err := nd.part.startCursor(receiveOf(testSub, 1+rng.IntN(3))); err == nil {
				pending = append(pending, cursorCall{at: nd.id, cl: cl, kind: "receive"})
			}
		case p < 55 && len(receipts) > 0:
			for r, off := range receipts {
				delete(receipts, r)
				if cl, err := nd.part.startCursor(ackOf(testSub, r)); err == nil {
					pending = append(pending, cursorCall{at: nd.id, cl: cl, kind: "ack", off: off})
				}
				break
			}
		case p < 59 && len(up) == 3:
			c.kill(up[rng.IntN(len(up))].id)
		case p < 66:
			for _, id := range c.ids {
				if !c.nodes[id].up {
					c.start(id)
					break
				}
			}
		case p < 69:
			one := c.ids[rng.IntN(len(c.ids))]
			c.net.Partition(c.others(one), []multiraft.NodeID{one})
		case p < 74:
			c.net.Heal()
		default:
			c.tick()
		}
		settle()
	}
	c.net.Heal()
	c.tolerateNoSource = false
	for _, id := range c.ids {
		if !c.nodes[id].up {
			c.start(id)
		}
	}
	for range 50 {
		c.tick()
	}
	settle()
	for _, f := range pending { // never answered: committed or not
		if f.kind == "ack" {
			maybeAcked[f.off] = true
		}
	}
	c.converge()
	c.clock = c.clock.Add(time.Hour)
	l := c.elect()
	drained := map[int64]bool{}
	for {
		ds, err := c.cursorAt(l, receiveOf(testSub, 1000))
		if err != nil {
			t.Fatalf("seed %d: drain on n%d: %v", seed, l, err)
		}
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			drained[d.Offset] = true
			if _, err := c.cursorAt(l, ackOf(testSub, d.Receipt)); err != nil {
				t.Fatalf("seed %d: ack of drained %d: %v", seed, d.Offset, err)
			}
		}
	}
	ackedAt := map[int64]uint64{}
	for _, a := range acked {
		if drained[a.off] {
			t.Fatalf("seed %d: offset %d acked (entry %d) and delivered again at the end", seed, a.off, a.index)
		}
		if i, ok := ackedAt[a.off]; !ok || a.index < i {
			ackedAt[a.off] = a.index
		}
	}
	for _, d := range delivered {
		if i, ok := ackedAt[d.off]; ok && d.index > i {
			t.Fatalf("seed %d: offset %d delivered by entry %d after its ack answered at entry %d", seed, d.off, d.index, i)
		}
	}
	for off := range stored {
		if _, ok := ackedAt[off]; !ok && !drained[off] && !maybeAcked[off] {
			t.Fatalf("seed %d: stored offset %d neither acked nor delivered at the end", seed, off)
		}
	}
	c.cursorsAgree()
	return int(c.sentSnapshots()), nacks, redeliveries
}
