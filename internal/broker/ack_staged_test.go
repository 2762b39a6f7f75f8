package broker

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testrace"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// TestAckStagedThenReceiveCrash: the native Consume stream frees an ack's
// lease slots once AckBatchStaged returns, before the acks are durable, so
// its next receive joins the acks' journal write. A power cut (with torn
// writes) at any moment of that overlap must leave a prefix: the receive's
// deliveries never durable without the acks, an ack reported durable never
// undone, nothing lost, and a receipt of a delivery answered before the
// cut refused once its lease ran out and the message went out again.
func TestAckStagedThenReceiveCrash(t *testing.T) {
	testrace.NotUnderRace(t)  // a few hundred broker opens
	seen := map[[3]bool]int{} // acks back, second receive durable, answered
	for seed := range uint64(150) {
		rng := rand.New(rand.NewPCG(seed, 19))
		e := newEnv(t, nil)
		mem := e.fs.(*vfs.MemFS)
		e.createQueue(QueueSettings{Name: "q", VisibilityTimeout: time.Minute})
		e.send("q", names("m", 20)...)
		first := e.receive("q", 10) // durable: its receive was answered
		batch1 := bodies(first)
		receipts := make([]string, len(first))
		for i, d := range first {
			receipts[i] = d.Receipt
		}

		errs, durable, err := e.b.AckBatchStaged(context.Background(), "q", receipts)
		if err != nil || errNotNil(errs) {
			t.Fatalf("seed %d: staged ack: %v %v", seed, err, errs)
		}
		var acked, received atomic.Bool
		var second atomic.Pointer[[]Delivery]
		go func() {
			if durable() == nil {
				acked.Store(true)
			}
		}()
		b := e.b // e.b is the reopened broker after the cut
		go func() {
			ds, err := b.Receive(context.Background(), "q", ReceiveOptions{Max: 10})
			if err == nil {
				second.Store(&ds)
				received.Store(true)
			}
		}()
		// Cut the power somewhere between the submission and well after
		// both writes are durable (a quarter of the seeds wait 5 ms, so a
		// loaded machine still sees answers before the cut).
		wait := time.Duration(rng.IntN(400)) * time.Microsecond
		if seed%4 == 3 {
			wait = 5 * time.Millisecond
		}
		for deadline := time.Now().Add(wait); time.Now().Before(deadline); {
			time.Sleep(10 * time.Microsecond)
		}
		ackedBefore, receivedBefore := acked.Load(), received.Load()
		var answered []Delivery
		if p := second.Load(); p != nil && receivedBefore {
			answered = *p
		}
		old := e.b
		mem.CrashWithTornWrites(rng)
		e.open()
		go old.Close() // its files fail with ErrCrashed

		visible := bodies(e.receive("q", 20))
		e.clock.Advance(2 * time.Minute)
		later := e.receive("q", 20)
		all := append(slices.Clone(visible), bodies(later)...)

		batch1Back := 0
		for _, b := range batch1 {
			if slices.Contains(all, b) {
				batch1Back++
			}
		}
		if batch1Back != 0 && batch1Back != len(batch1) {
			t.Fatalf("seed %d: %d of batch 1's %d acks survived: one write holds them all", seed, len(batch1)-batch1Back, len(batch1))
		}
		if ackedBefore && batch1Back > 0 {
			t.Fatalf("seed %d: acks reported durable came back: %v", seed, all)
		}
		// The second receive's deliveries that survived are not visible
		// now; any of them means the acks before them survived too.
		secondSurvived := false
		for _, b := range names("m", 20)[10:] {
			if !slices.Contains(visible, b) {
				secondSurvived = true
			}
			if !slices.Contains(all, b) {
				t.Fatalf("seed %d: %s lost (visible %v, later %v)", seed, b, visible, bodies(later))
			}
		}
		if secondSurvived && batch1Back > 0 {
			t.Fatalf("seed %d: a receive after the acks is durable but the acks are not", seed)
		}
		if len(answered) > 0 && !secondSurvived {
			t.Fatalf("seed %d: a receive answered before the cut was lost", seed)
		}
		// The answered deliveries' leases ran out and the messages went out
		// again (later): their old receipts are fenced off.
		for _, d := range answered {
			if err := e.b.Ack(context.Background(), "q", d.Receipt); err == nil {
				t.Fatalf("seed %d: a receipt from before the cut and an expired lease was accepted", seed)
			}
		}
		seen[[3]bool{batch1Back > 0, secondSurvived, len(answered) > 0}]++
		e.b.Close()
		e.b = nil
	}
	// The cuts must land before, between and after the writes, or the
	// test checks nothing of the overlap.
	t.Logf("outcomes (acks undone, second receive durable, answered): %v", seen)
	if seen[[3]bool{true, false, false}] == 0 || seen[[3]bool{false, true, true}] == 0 {
		t.Fatalf("the cuts missed an outcome: %v", seen)
	}
}

func errNotNil(errs []error) bool {
	for _, err := range errs {
		if err != nil {
			return true
		}
	}
	return false
}
