package txn

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testrace"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// script is a deterministic run over two transactional ids, long enough to
// make the log rewrite itself (put's threshold) at least once.
func script(c *Coordinator, ck *clock) []func() error {
	var ops []func() error
	var a, b, v Producer // v: KIP-890 part 2's requests (EndTxn v5 and the implicit adds)
	ops = append(ops,
		func() (err error) { a, err = c.InitProducerID("a", 10*time.Second, noProducer); return },
		func() (err error) { b, err = c.InitProducerID("b", 10*time.Second, noProducer); return },
		func() (err error) { v, err = c.InitProducerID("v2", 10*time.Second, noProducer); return },
	)
	for i := range 120 {
		ops = append(ops,
			func() error {
				ck.advance(time.Second)
				return c.AddPartitions("a", a.ID, a.Epoch, []Partition{tp0, tp1})
			},
			func() error { return c.AddGroup("a", a.ID, a.Epoch, "g") },
			func() error {
				return c.CommitOffsets("a", a.ID, a.Epoch, []Offset{{Group: "g", Topic: "in", Offset: int64(i)}})
			},
			func() error { return c.AddPartitions("b", b.ID, b.Epoch, []Partition{tp1}) },
			func() error { return c.EndTxn("a", a.ID, a.Epoch, i%3 != 0) },
			func() error { return c.AddImplicit(v.ID, v.Epoch, tp0) },
			func() error {
				return c.CommitOffsetsImplicit("v2", v.ID, v.Epoch, []Offset{{Group: "h", Topic: "in", Offset: int64(i)}})
			},
			func() (err error) {
				next, err := c.EndTxnBump("v2", v.ID, v.Epoch, i%4 != 0)
				if err == nil {
					v = next
				}
				return err
			},
		)
		if i%10 == 9 {
			// b left its transaction open: its timeout aborts it.
			ops = append(ops, func() error { ck.advance(11 * time.Second); c.Tick(); return nil },
				func() (err error) { b, err = c.InitProducerID("b", 10*time.Second, b); return })
		}
	}
	return ops
}

// durableView is what must survive: every field but the update time.
func durableView(c *Coordinator) map[string]Txn {
	out := map[string]Txn{}
	for _, t := range c.List(Filter{}) {
		t.Updated = time.Time{}
		out[t.ID] = t
	}
	return out
}

// TestCrashAtEveryWrite fails each write, sync, rename or directory sync
// of the coordinator's files in turn (the failing write half-written),
// crashes with torn writes, reopens, finishes what was prepared, and finds
// either the state before the interrupted operation or the one after: an
// answered operation is never lost, a refused one never half applied.
func TestCrashAtEveryWrite(t *testing.T) {
	testrace.NotUnderRace(t)
	// The reference run, without faults: the state after each operation.
	ref := &clock{t: time.Unix(1000, 0)}
	rc := open(t, newMem(t), &fakeEffects{}, ref)
	var states []map[string]Txn
	states = append(states, durableView(rc))
	for i, op := range script(rc, ref) {
		if err := op(); err != nil {
			t.Fatalf("reference op %d: %v", i, err)
		}
		states = append(states, durableView(rc))
	}
	step := 1
	if testing.Short() {
		step = 7
	}
	for k := 1; ; k += step {
		mem := newMem(t)
		efs := vfs.NewErrorFS(mem)
		failKth(efs, k)
		ck := &clock{t: time.Unix(1000, 0)}
		fx := &fakeEffects{}
		c, err := Open(Config{FS: efs, Dir: "/data", Now: ck.now, Effects: fx, MaxTimeout: time.Minute})
		if err != nil {
			continue // the fault hit the log's creation: nothing to check
		}
		ops := script(c, ck)
		failedAt := -1
		for i, op := range ops {
			_ = op()
			if efs.Fired(vfs.OpAny)+efs.Fired(vfs.OpWrite)+efs.Fired(vfs.OpSync) > 0 {
				failedAt = i
				break
			}
		}
		c.Close()
		if failedAt < 0 {
			if k == 1 {
				t.Fatal("no fault fired")
			}
			return // k is past the last write
		}
		mem.CrashWithTornWrites(rand.New(rand.NewPCG(uint64(k), 7)))
		// The effects keep their state (they are the partitions and the
		// producer ids, durable on their own).
		re, err := Open(Config{FS: mem, Dir: "/data", Now: ck.now, Effects: fx, MaxTimeout: time.Minute})
		if err != nil {
			t.Fatalf("k=%d: reopen: %v", k, err)
		}
		re.Tick()
		got := durableView(re)
		re.Close()
		before, after := states[failedAt], states[failedAt+1]
		for id, g := range got {
			if g.Epoch < before[id].Epoch {
				t.Fatalf("k=%d: %s went back from epoch %d to %d", k, id, before[id].Epoch, g.Epoch)
			}
		}
		if !sameState(got, before) && !sameState(got, after) {
			t.Fatalf("k=%d, fault in op %d: reopened\n%v\nwant\n%v\nor\n%v", k, failedAt, got, before, after)
		}
	}
}

// sameState compares two views of whole states.
// Epochs may differ: a bump whose record was lost is bumped past again
// (the producer ids are durable on their own, and only ever go up).
func sameState(a, b map[string]Txn) bool {
	norm := func(m map[string]Txn) string {
		out := map[string]Txn{}
		for id, t := range m {
			t.Epoch, t.LastEpoch = 0, 0
			out[id] = t
		}
		return fmt.Sprint(out)
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

// TestOpenCutsTornTail: a damaged last record is cut at open and new
// records follow the good ones; if the cut cannot be made durable, Open
// fails rather than appending after garbage.
func TestOpenCutsTornTail(t *testing.T) {
	mem := newMem(t)
	fx, ck := &fakeEffects{}, &clock{t: time.Unix(1000, 0)}
	c := open(t, mem, fx, ck)
	p, _ := c.InitProducerID("a", time.Second, noProducer)
	c.Close()
	f, _ := mem.OpenAppend("/data/" + LogFile)
	f.Write([]byte{0, 0, 0, 9, 1, 2})
	f.Sync()
	f.Close()
	efs := vfs.NewErrorFS(mem)
	efs.Inject(vfs.Fault{Op: vfs.OpSync, Path: "/data/" + LogFile})
	if _, err := Open(Config{FS: efs, Dir: "/data", Now: ck.now, Effects: fx}); err == nil {
		t.Fatal("open succeeded though the torn tail's cut was not synced")
	}
	c = open(t, mem, fx, ck)
	if err := c.AddPartitions("a", p.ID, p.Epoch, []Partition{tp0}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	c = open(t, mem, fx, ck)
	if got, _ := c.Describe([]string{"a"}); got[0].State != Ongoing {
		t.Fatalf("after the cut and a new record: %+v", got)
	}
}
