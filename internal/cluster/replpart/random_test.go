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
// stored twice. The Raft log is compacted behind the snapshots (every 20 entries), so a
// follower cut off or down long enough is sent a snapshot and pulls the records from a
// peer: over the seeds, snapshots must be sent and records pulled (or the test tested
// nothing), and the replicas that pulled end as identical as the others. Short form 20
// seeds × 600 steps; SLUICE_REPLPART_SEEDS and SLUICE_REPLPART_STEPS for more.
func TestRandomizedNoAckLost(t *testing.T) {
	seeds, steps := envInt("SLUICE_REPLPART_SEEDS", 20), envInt("SLUICE_REPLPART_STEPS", 600)
	for _, d := range []struct {
		name    string
		newDisk func(multiraft.NodeID) disk
		seeds   int
	}{{"mem", newMemDisk, seeds}, {"raftstore", newStoreDisk, max(1, seeds/4)}} {
		t.Run(d.name, func(t *testing.T) {
			var total runStats
			for seed := range d.seeds {
				r := randomRun(t, int64(seed), steps, d.newDisk)
				total.cuts, total.restores = total.cuts+r.cuts, total.restores+r.restores
				total.snaps, total.pulled = total.snaps+r.snaps, total.pulled+r.pulled
			}
			t.Logf("%d seeds × %d steps: %d checkpoint restores, %d of them cut applied batches; %d snapshots sent, %d batches pulled",
				d.seeds, steps, total.restores, total.cuts, total.snaps, total.pulled)
			if total.cuts == 0 {
				t.Fatalf("no restart over every seed found its log past its checkpoint")
			}
			if total.snaps == 0 || total.pulled == 0 {
				t.Fatalf("%d snapshots sent and %d batches pulled over every seed: compaction never outran a follower", total.snaps, total.pulled)
			}
		})
	}
}

type inflight struct {
	at  multiraft.NodeID
	cl  *call
	key string
}

// runStats is what one randomized run did.
type runStats struct{ cuts, restores, snaps, pulled int }

func randomRun(t *testing.T, seed int64, steps int, newDisk func(multiraft.NodeID) disk) (st runStats) {
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	// A snapshot every 5 entries and chunks of about 30 bytes: a follower down or cut off
	// for a few appends is past the compacted log and pulls, in several chunks.
	c := newClusterOn(t, seed, 3, newDisk, chunked(30), func(c *cluster) {
		c.cfg.SnapshotEntries = 5
		c.tolerateNoSource = true // a restart cut off from its peers before its pull finished
		c.capture = seed%2 == 1   // odd seeds: checkpoints made durable off the Ready loop
		// A kill may find some batches applied past the checkpoint written back to disk.
		c.unsyncedKept = func() int { return max(0, rng.IntN(8)-3) }
	})
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
	c.tolerateNoSource = false
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
	st.snaps = int(c.sentSnapshots())
	for _, nd := range c.nodes {
		if nd.log.refusals > 0 {
			t.Fatalf("seed %d: n%d's log refused %d restores", seed, nd.id, nd.log.refusals)
		}
		st.cuts, st.restores, st.pulled = st.cuts+nd.log.cuts, st.restores+nd.log.restores, st.pulled+nd.log.pulled
	}
	return st
}
