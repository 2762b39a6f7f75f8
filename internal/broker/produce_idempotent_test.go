package broker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// partitionSyncGate holds the next fdatasync of topic idem's partition 0
// while armed: the group's write is done, its sync not.
type partitionSyncGate struct {
	syncs   atomic.Int64 // of the partition's segments, held or not
	armed   atomic.Bool
	held    chan struct{}
	release chan struct{}
	ended   chan struct{} // the test is over: nothing is held any more
}

func newPartitionSyncGate(t *testing.T, efs *vfs.ErrorFS) *partitionSyncGate {
	g := &partitionSyncGate{held: make(chan struct{}), release: make(chan struct{}), ended: make(chan struct{})}
	t.Cleanup(func() { close(g.ended) }) // before the broker closes: a failed test ends, not hangs
	efs.Inject(vfs.Fault{Op: vfs.OpSync, Match: func(_ vfs.Op, path string) bool {
		if !isIdemSegment(path) {
			return false
		}
		g.syncs.Add(1)
		if g.armed.CompareAndSwap(true, false) {
			select {
			case g.held <- struct{}{}:
				select {
				case <-g.release:
				case <-g.ended:
				}
			case <-g.ended:
			}
		}
		return false // delays the sync, never fails it
	}})
	return g
}

// produceHeld produces raw to idem/0 in the background and returns once the
// sync it waits for is held; the channel gets the produce's error.
func (g *partitionSyncGate) produceHeld(e *env, raw []byte) <-chan error {
	g.armed.Store(true)
	done := make(chan error, 1)
	go func() { _, err := e.produceRaw("idem", 0, raw); done <- err }()
	<-g.held
	return done
}

func isIdemSegment(path string) bool {
	return strings.Contains(path, "-idem/0/") && strings.HasSuffix(path, ".log")
}

// initProducers gets n idempotent producer ids.
func (e *env) initProducers(n int) []*batch.Producer {
	e.t.Helper()
	out := make([]*batch.Producer, n)
	for i := range out {
		pid, err := e.b.InitProducerID("")
		if err != nil {
			e.t.Fatal(err)
		}
		out[i] = &batch.Producer{ID: pid.ID, Epoch: pid.Epoch}
	}
	return out
}

// TestIdempotentProducersShareASync: while one producer's batch waits for its
// sync, the batches of the partition's other idempotent producers are placed
// and go to disk together in the next sync. (The producer lock was held
// across the sync: each producer then waited for the one before it, one
// sync each, and 32 producers wrote 14 times less than one.)
func TestIdempotentProducersShareASync(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.NewMem())
	e := newEnv(t, efs)
	e.createTopic("idem", 1)
	prods := e.initProducers(9)
	gate := newPartitionSyncGate(t, efs)

	first := gate.produceHeld(e, buildBatch(t, prods[0], "first"))

	var wg sync.WaitGroup
	var answered atomic.Int32
	for i, p := range prods[1:] {
		wg.Go(func() {
			if _, err := e.produceRaw("idem", 0, buildBatch(t, p, "next", string(rune('a'+i)))); err != nil {
				t.Errorf("producer %d: %v", i+1, err)
			}
			answered.Add(1)
		})
	}
	_, prt, err := e.b.streams.partition("idem", 0)
	if err != nil {
		t.Fatal(err)
	}
	// All eight are placed while the first one's sync is held: the log's next offset
	// is past them (one record for the first, two for each of the others).
	waitFor(t, func() bool { return prt.log.PlacedEnd() == 1+8*2 })
	if a := answered.Load(); a != 0 {
		t.Fatalf("%d produces answered before their sync", a)
	}
	syncsBefore := gate.syncs.Load()
	gate.release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got := gate.syncs.Load() - syncsBefore; got > 2 {
		t.Fatalf("%d syncs for the eight batches placed together, want at most 2", got)
	}
	if hw := e.hw("idem", 0); hw != 17 {
		t.Fatalf("high watermark %d, want 17", hw)
	}
}

// TestIdempotentBatchDroppedByAFailedWrite: a batch placed and recorded, then
// dropped because its group's write failed, is not remembered: the producer's
// retry is stored (not answered as a duplicate of offsets nothing holds).
func TestIdempotentBatchDroppedByAFailedWrite(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem)
	e := newEnv(t, efs)
	e.createTopic("idem", 1)
	prod := e.initProducers(1)[0]
	a := buildBatch(t, prod, "a")
	efs.Inject(vfs.Fault{Op: vfs.OpWrite, Count: 1, Match: func(_ vfs.Op, path string) bool { return isIdemSegment(path) }})
	if _, err := e.produceRaw("idem", 0, a); err == nil {
		t.Fatal("produce succeeded though its write failed")
	}
	r, err := produceWithin(t, e, a)
	if err != nil || r.Duplicate[0] || r.BaseOffsets[0] != 0 {
		t.Fatalf("retry after the failed write: %+v %v, want stored at 0", r, err)
	}
	if hw := e.hw("idem", 0); hw != 1 {
		t.Fatalf("high watermark %d, want 1", hw)
	}
	next := &batch.Producer{ID: prod.ID, Epoch: prod.Epoch, BaseSequence: 1}
	if r, err := e.produceRaw("idem", 0, buildBatch(t, next, "b")); err != nil || r.BaseOffsets[0] != 1 {
		t.Fatalf("next batch: %+v %v", r, err)
	}
	// And the state a crash rebuilds agrees.
	e.crashNow(mem)
	if r, err := e.produceRaw("idem", 0, a); err != nil || !r.Duplicate[0] || r.BaseOffsets[0] != 0 {
		t.Fatalf("retry after the crash: %+v %v, want the duplicate at 0", r, err)
	}
}

// TestIdempotentRetryWaitsForItsOriginal: a retry that arrives while the
// original is placed but not yet synced is answered as a duplicate only once
// the original is durable; if the original is then dropped, the retry fails
// too and the next one is stored.
func TestIdempotentRetryWaitsForItsOriginal(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.NewMem())
	e := newEnv(t, efs)
	e.createTopic("idem", 1)
	prod := e.initProducers(1)[0]
	a := buildBatch(t, prod, "a")
	gate := newPartitionSyncGate(t, efs)

	orig := gate.produceHeld(e, a)
	retry := make(chan ProduceBatchesResult, 1)
	go func() {
		r, err := e.produceRaw("idem", 0, a)
		if err != nil {
			t.Errorf("retry: %v", err)
		}
		retry <- r
	}()
	select {
	case r := <-retry:
		t.Fatalf("retry answered %+v while its original's sync is held", r)
	case <-time.After(50 * time.Millisecond):
	}
	gate.release <- struct{}{}
	if err := <-orig; err != nil {
		t.Fatal(err)
	}
	if r := <-retry; !r.Duplicate[0] || r.BaseOffsets[0] != 0 {
		t.Fatalf("retry: %+v, want the duplicate at 0", r)
	}

	// The original dropped while a retry waits on it: both fail, the next retry is stored.
	b := buildBatch(t, &batch.Producer{ID: prod.ID, Epoch: prod.Epoch, BaseSequence: 1}, "b")
	failed := make(chan struct{})
	efs.Inject(vfs.Fault{Op: vfs.OpWrite, Count: 1, Match: func(_ vfs.Op, path string) bool {
		if isIdemSegment(path) {
			<-failed // until the retry waits
			return true
		}
		return false
	}})
	errs := make(chan error, 2)
	go func() { _, err := e.produceRaw("idem", 0, b); errs <- err }()
	_, prt, _ := e.b.streams.partition("idem", 0)
	waitFor(t, func() bool { return prt.log.PlacedEnd() == 2 }) // b is placed
	go func() { _, err := e.produceRaw("idem", 0, b); errs <- err }()
	time.Sleep(20 * time.Millisecond) // the retry finds b and waits on it
	close(failed)
	for range 2 {
		if err := <-errs; err == nil {
			t.Fatal("an answer for a batch whose write failed")
		} else if errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	}
	if r, err := produceWithin(t, e, b); err != nil || r.Duplicate[0] || r.BaseOffsets[0] != 1 {
		t.Fatalf("retry after the drop: %+v %v, want stored at 1", r, err)
	}
}

// produceWithin produces raw to idem/0 and fails the test if no answer comes
// within 10 s (a retry waiting on a batch that was dropped would wait forever).
func produceWithin(t *testing.T, e *env, raw []byte) (ProduceBatchesResult, error) {
	t.Helper()
	type answer struct {
		r   ProduceBatchesResult
		err error
	}
	c := make(chan answer, 1)
	go func() { r, err := e.produceRaw("idem", 0, raw); c <- answer{r, err} }()
	select {
	case a := <-c:
		return a.r, a.err
	case <-time.After(10 * time.Second):
		t.Fatal("no answer in 10 s")
		return ProduceBatchesResult{}, nil
	}
}

// TestProducerSnapshotLeavesOutPlacedBatches: a producer snapshot written
// while a batch is placed and not yet synced leaves that batch out, so after
// a power cut that lost it the producer's retry is stored, not answered as a
// duplicate of offsets the log does not hold.
func TestProducerSnapshotLeavesOutPlacedBatches(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem)
	e := newEnv(t, efs)
	e.createTopic("idem", 1)
	prod := e.initProducers(1)[0]
	a := buildBatch(t, prod, "a")
	gate := newPartitionSyncGate(t, efs)

	orig := gate.produceHeld(e, a)
	_, prt, err := e.b.streams.partition("idem", 0)
	if err != nil {
		t.Fatal(err)
	}
	// Through mem: the held sync holds ErrorFS's lock.
	if err := prt.prod.MaybeSnapshot(prt.log, mem, prt.dir, true); err != nil {
		t.Fatal(err)
	}
	cut := mem.CrashClone() // the power goes before a's sync
	gate.release <- struct{}{}
	<-orig
	e.crashOnto(cut)
	if r, err := produceWithin(t, e, a); err != nil || r.Duplicate[0] || r.BaseOffsets[0] != 0 {
		t.Fatalf("retry after the cut: %+v %v, want stored at 0", r, err)
	}
	if hw := e.hw("idem", 0); hw != 1 {
		t.Fatalf("high watermark %d, want 1", hw)
	}
}
