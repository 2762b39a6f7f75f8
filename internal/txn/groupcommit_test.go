package txn

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testrace"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// idScript is one transactional id's requests, in order: KIP-98's
// (AddPartitions, AddGroup, TxnOffsetCommit, EndTxn) and KIP-890 part 2's
// (implicit adds, EndTxn v5) in turn. Every id's requests are independent
// of the others', so many ids can run it at once.
func idScript(c *Coordinator, id string, rounds int) []func() error {
	var p Producer
	ops := []func() error{
		func() (err error) { p, err = c.InitProducerID(id, time.Minute, noProducer); return },
	}
	for i := range rounds {
		if i%2 == 0 {
			ops = append(ops,
				func() error { return c.AddPartitions(id, p.ID, p.Epoch, []Partition{tp0, tp1}) },
				func() error { return c.AddGroup(id, p.ID, p.Epoch, "g") },
				func() error {
					return c.CommitOffsets(id, p.ID, p.Epoch, []Offset{{Group: "g", Topic: "in", Offset: int64(i)}})
				},
				func() error { return c.EndTxn(id, p.ID, p.Epoch, i%3 != 0) },
			)
			continue
		}
		ops = append(ops,
			func() error { return c.AddImplicit(p.ID, p.Epoch, tp0) },
			func() error {
				return c.CommitOffsetsImplicit(id, p.ID, p.Epoch, []Offset{{Group: "h", Topic: "in", Offset: int64(i)}})
			},
			func() error {
				next, err := c.EndTxnBump(id, p.ID, p.Epoch, i%4 != 1)
				if err == nil {
					p = next
				}
				return err
			},
		)
	}
	return ops
}

// idView is what of a transaction must survive a crash, with what depends
// on how the ids interleaved (the producer ids handed out) left out.
func idView(t Txn) string {
	t.ID, t.ProducerID, t.Ended.ID, t.Updated = "", 0, 0, time.Time{}
	return fmt.Sprintf("%+v", t)
}

// TestConcurrentIDsCrash runs many transactional ids at once, so that
// their records share syncs, fails the k-th write or sync of the log (the
// write half done), crashes with torn writes and reopens: every id is in
// the state after its last answered request, or after the one it had in
// flight. An answer given before its record was synced, because another
// id's sync seemed to cover it, would show as an id found earlier.
func TestConcurrentIDsCrash(t *testing.T) {
	testrace.NotUnderRace(t)
	const ids, rounds = 8, 12
	// The states one id goes through, alone.
	ref := &clock{t: time.Unix(1000, 0)}
	rc := open(t, newMem(t), &fakeEffects{}, ref)
	states := []string{""} // before InitProducerID: no transaction
	for i, op := range idScript(rc, "r", rounds) {
		if err := op(); err != nil {
			t.Fatalf("reference op %d: %v", i, err)
		}
		got, _ := rc.Describe([]string{"r"})
		states = append(states, idView(got[0]))
	}
	rng := rand.New(rand.NewPCG(3, 5))
	tries := 40
	if testing.Short() {
		tries = 12
	}
	for try := range tries {
		k := 1 + rng.IntN(300)
		mem := newMem(t)
		efs := vfs.NewErrorFS(mem)
		failKth(efs, k)
		ck := &clock{t: time.Unix(1000, 0)}
		fx := &fakeEffects{}
		c, err := Open(Config{FS: efs, Dir: "/data", Now: ck.now, Effects: fx, MaxTimeout: time.Minute})
		if err != nil {
			continue
		}
		answered := make([]int, ids) // requests answered per id, in script order
		var wg sync.WaitGroup
		for g := range ids {
			wg.Go(func() {
				for _, op := range idScript(c, fmt.Sprint("id", g), rounds) {
					if op() != nil {
						return // the log failed: every later request fails too
					}
					answered[g]++
				}
			})
		}
		wg.Wait()
		// No Close: it would sync what was written and not yet answered.
		mem.CrashWithTornWrites(rand.New(rand.NewPCG(uint64(try), 11)))
		re, err := Open(Config{FS: mem, Dir: "/data", Now: ck.now, Effects: fx, MaxTimeout: time.Minute})
		if err != nil {
			t.Fatalf("try %d (k=%d): reopen: %v", try, k, err)
		}
		re.Tick() // finishes what was prepared, as the broker's first tick does
		for g := range ids {
			id := fmt.Sprint("id", g)
			view := ""
			if got, _ := re.Describe([]string{id}); len(got) == 1 {
				view = idView(got[0])
			}
			a := answered[g]
			ok := view == states[a] || (a+1 < len(states) && view == states[a+1])
			if !ok {
				t.Fatalf("try %d (fault at write or sync %d): %s answered %d requests; reopened as\n%s\nwant\n%s\nor the next\n%s",
					try, k, id, a, view, states[a], states[min(a+1, len(states)-1)])
			}
		}
		re.Close()
		c.Close()
	}
}

// TestConcurrentIDsShareSyncs: with a disk whose sync takes 2 ms, 16 ids
// running transactions at once have several records per fdatasync of
// transactions.log, where a sync per record held under the lock had one.
func TestConcurrentIDsShareSyncs(t *testing.T) {
	slow := &vfs.SlowSyncFS{FS: newMem(t), Delay: func() time.Duration { return 2 * time.Millisecond }}
	ck := &clock{t: time.Unix(1000, 0)}
	c := open(t, slow, &fakeEffects{}, ck)
	atOpen := len(slow.Syncs()) // the new file's
	const ids, rounds = 16, 6
	var wg sync.WaitGroup
	errs := make(chan error, ids)
	for g := range ids {
		wg.Go(func() {
			for _, op := range idScript(c, fmt.Sprint("id", g), rounds) {
				if err := op(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st, ok := c.LogStats()
	records, syncs := st.Records, uint64(len(slow.Syncs())-atOpen)
	t.Logf("%d records, %d syncs (%.1f records per sync)", records, syncs, float64(records)/float64(syncs))
	if !ok || st.Syncs != syncs {
		t.Fatalf("LogStats %+v (%v), the disk saw %d syncs", st, ok, syncs)
	}
	if syncs == 0 || records < 2*syncs {
		t.Fatalf("%d records took %d syncs: concurrent transactions do not share syncs", records, syncs)
	}
	// Every id ended where it ends alone.
	ref := open(t, newMem(t), &fakeEffects{}, &clock{t: time.Unix(1000, 0)})
	for _, op := range idScript(ref, "r", rounds) {
		if err := op(); err != nil {
			t.Fatal(err)
		}
	}
	want, _ := ref.Describe([]string{"r"})
	for g := range ids {
		got, _ := c.Describe([]string{fmt.Sprint("id", g)})
		if !reflect.DeepEqual(idView(got[0]), idView(want[0])) {
			t.Fatalf("id%d ended as %s, alone it ends as %s", g, idView(got[0]), idView(want[0]))
		}
	}
}
