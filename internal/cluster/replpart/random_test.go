package replpart

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// TestRandomizedNoAckLost: seeded schedules of appends on random nodes (a producer
// retrying keys whose append's outcome it did not learn), kills with the local log crashed
// to its checkpoint, restarts, partitions and heals. At the end, healed with every node up:
// every replica holds the same batches at contiguous offsets, every acknowledged batch is
// at the offset its Append answered (a duplicate: where the first copy is), and no key is
// stored twice; no host ever sent a snapshot (a partition's follower must catch up from
// the log, across restarts too: it failed so while MemEngine's crash dropped the log below
// the last snapshot). Short form 20 seeds × 600 steps; SLUICE_REPLPART_SEEDS and
// SLUICE_REPLPART_STEPS for more.
func TestRandomizedNoAckLost(t *testing.T) {
	seeds, steps := envInt("SLUICE_REPLPART_SEEDS", 20), envInt("SLUICE_REPLPART_STEPS", 600)
	for _, d := range []struct {
		name    string
		newDisk func(multiraft.NodeID) disk
		seeds   int
	}{{"mem", newMemDisk, seeds}, {"raftstore", newStoreDisk, max(1, seeds/4)}} {
		t.Run(d.name, func(t *testing.T) {
			var cuts, restores int
			for seed := range d.seeds {
				r, rs := randomRun(t, int64(seed), steps, d.newDisk)
				cuts, restores = cuts+r, restores+rs
			}
			t.Logf("%d seeds × %d steps: %d checkpoint restores, %d of them cut applied batches", d.seeds, steps, restores, cuts)
		})
	}
}

type inflight struct {
	at  multiraft.NodeID
	cl  *call
	key string
}

func randomRun(t *testing.T, seed int64, steps int, newDisk func(multiraft.NodeID) disk) (cuts, restores int) {
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	c := newClusterOn(t, seed, 3, newDisk)
	acked := map[string]int64{} // key -> the offset an Append answered
	var unknown []string        // keys whose outcome the producer did not learn
	var pending []inflight
	keys := 0
	settleCalls := func() {
		kept := pending[:0]
		for _, f := range pending {
			select {
			case <-f.cl.p.Done():
			default:
				kept = append(kept, f)
				continue
			}
			rs, err := c.nodes[f.at].part.finish(f.cl)
			switch {
			case err == nil:
				if prev, ok := acked[f.key]; ok && prev != rs[0].Base {
					t.Fatalf("seed %d: key %s acknowledged at %d and at %d", seed, f.key, prev, rs[0].Base)
				}
				acked[f.key] = rs[0].Base
			case errors.Is(err, ErrOutcomeUnknown):
				unknown = append(unknown, f.key)
			}
		}
		pending = kept
	}
	for range steps {
		switch p := rng.IntN(100); {
		case p < 45:
			up := c.up()
			nd := up[rng.IntN(len(up))]
			key := fmt.Sprintf("k%d", keys)
			if len(unknown) > 0 && rng.IntN(3) == 0 { // the producer retries
				key, unknown = unknown[0], unknown[1:]
			} else {
				keys++
			}
			cl, err := nd.part.start([][]byte{[]byte(key + ":" + "xyz"[:rng.IntN(3)])})
			if err == nil {
				pending = append(pending, inflight{nd.id, cl, key})
			} else if !errors.Is(err, ErrNotLeader) {
				unknown = append(unknown, key)
			}
		case p < 50 && len(c.up()) == 3:
			up := c.up()
			c.kill(up[rng.IntN(len(up))].id)
		case p < 58:
			for _, id := range c.ids {
				if !c.nodes[id].up {
					c.start(id)
					break
				}
			}
		case p < 61:
			one := c.ids[rng.IntN(len(c.ids))]
			var rest []multiraft.NodeID
			for _, id := range c.ids {
				if id != one {
					rest = append(rest, id)
				}
			}
			c.net.Partition(rest, []multiraft.NodeID{one})
		case p < 66:
			c.net.Heal()
		default:
			c.tick()
		}
		settleCalls()
	}
	c.net.Heal()
	for _, id := range c.ids {
		if !c.nodes[id].up {
			c.start(id)
		}
	}
	for range 50 {
		c.tick()
	}
	settleCalls()
	recs := c.converge()
	checkOffsets(t, recs)
	at := map[string]int64{}
	for _, r := range recs {
		key, _, _ := strings.Cut(r.Batch, ":")
		if prev, ok := at[key]; ok {
			t.Fatalf("seed %d: key %s stored twice, at %d and %d", seed, key, prev, r.Base)
		}
		at[key] = r.Base
	}
	for key, off := range acked {
		if got, ok := at[key]; !ok || got != off {
			t.Fatalf("seed %d: acknowledged key %s at %d; the log has it at %d (present: %v)", seed, key, off, got, ok)
		}
	}
	if n := c.sentSnapshots(); n > 0 {
		t.Fatalf("seed %d: %d snapshots sent: the Raft log was compacted under the partition", seed, n)
	}
	for _, nd := range c.nodes {
		if nd.log.refusals > 0 {
			t.Fatalf("seed %d: n%d's log refused %d restores", seed, nd.id, nd.log.refusals)
		}
		cuts, restores = cuts+nd.log.cuts, restores+nd.log.restores
	}
	return cuts, restores
}
