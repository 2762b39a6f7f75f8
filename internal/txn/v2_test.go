package txn

import (
	"errors"
	"math"
	"testing"
	"time"
)

// TestEndTxnBump walks KIP-890 part 2 through one transactional id: each
// step's error, the producer it answers and the state after it. The
// producer starts at epoch 0 (id 0).
func TestEndTxnBump(t *testing.T) {
	fx, ck := &fakeEffects{}, &clock{t: time.Unix(1000, 0)}
	c := open(t, newMem(t), fx, ck)
	p0, _ := c.InitProducerID("etl", 10*time.Second, noProducer)
	e := func(n int16) Producer { return Producer{ID: p0.ID, Epoch: p0.Epoch + n} }
	end := func(at Producer, commit bool) func() (Producer, error) {
		return func() (Producer, error) { return c.EndTxnBump("etl", at.ID, at.Epoch, commit) }
	}
	produce := func(at Producer) func() (Producer, error) {
		return func() (Producer, error) { return Producer{}, c.AddImplicit(at.ID, at.Epoch, tp0) }
	}
	offsets := func(at Producer) func() (Producer, error) {
		return func() (Producer, error) {
			return Producer{}, c.CommitOffsetsImplicit("etl", at.ID, at.Epoch, []Offset{{Group: "g", Topic: "in", Offset: 5}})
		}
	}
	steps := []struct {
		name  string
		do    func() (Producer, error)
		err   error
		want  Producer // checked when err is nil and want.ID is set
		state State
	}{
		{"commit with nothing open", end(e(0), true), ErrInvalidState, Producer{}, Empty},
		{"produce adds its partition", produce(e(0)), nil, Producer{}, Ongoing},
		{"offsets add their group", offsets(e(0)), nil, Producer{}, Ongoing},
		{"commit bumps", end(e(0), true), nil, e(1), CompleteCommit},
		{"commit retried at the old epoch", end(e(0), true), nil, e(1), CompleteCommit},
		{"abort retried at the old epoch", end(e(0), false), ErrInvalidState, Producer{}, CompleteCommit},
		{"late produce of the committed transaction", produce(e(0)), ErrFenced, Producer{}, CompleteCommit},
		{"late offsets of the committed transaction", offsets(e(0)), ErrFenced, Producer{}, CompleteCommit},
		{"empty abort bumps", end(e(1), false), nil, e(2), CompleteAbort},
		{"next transaction", produce(e(2)), nil, Producer{}, Ongoing},
		{"retry of the empty abort once the next began", end(e(1), false), ErrFenced, Producer{}, Ongoing},
		{"abort bumps", end(e(2), false), nil, e(3), CompleteAbort},
		{"a zombie two epochs back", end(e(1), true), ErrFenced, Producer{}, CompleteAbort},
		{"a future epoch", end(e(9), true), ErrFenced, Producer{}, CompleteAbort},
		{"another producer id", end(Producer{ID: 99, Epoch: 3}, true), ErrIDMapping, Producer{}, CompleteAbort},
	}
	for _, s := range steps {
		got, err := s.do()
		if !errors.Is(err, s.err) {
			t.Fatalf("%s: %v, want %v", s.name, err, s.err)
		}
		if err == nil && s.want.ID == p0.ID && got != s.want {
			t.Fatalf("%s: answered %+v, want %+v", s.name, got, s.want)
		}
		if d, _ := c.Describe([]string{"etl"}); d[0].State != s.state {
			t.Fatalf("%s: state %v, want %v", s.name, d[0].State, s.state)
		}
	}
	// Markers: the commit's and the abort's, each with the epoch bumped
	// at its end; the empty abort wrote none.
	want := []marker{{p0.ID, 1, true, []Partition{tp0}}, {p0.ID, 3, false, []Partition{tp0}}}
	if len(fx.markers) != len(want) {
		t.Fatalf("markers %+v, want %+v", fx.markers, want)
	}
	for i, m := range fx.markers {
		if m.pid != want[i].pid || m.epoch != want[i].epoch || m.commit != want[i].commit {
			t.Fatalf("marker %d: %+v, want %+v", i, m, want[i])
		}
	}
	if len(fx.offsets) != 1 || fx.offsets[0].Group != "g" {
		t.Fatalf("offsets applied %+v, want the committed one", fx.offsets)
	}
}

// TestEndTxnBumpTimeout: a transaction aborted at its timeout bumps the
// epoch; a part-2 producer still at the old one is told
// TRANSACTION_ABORTABLE (not fenced, which is fatal to it), its abort at
// the old epoch succeeds with the current producer, and it goes on.
func TestEndTxnBumpTimeout(t *testing.T) {
	fx, ck := &fakeEffects{}, &clock{t: time.Unix(1000, 0)}
	c := open(t, newMem(t), fx, ck)
	p, _ := c.InitProducerID("etl", 10*time.Second, noProducer)
	if err := c.AddImplicit(p.ID, p.Epoch, tp0); err != nil {
		t.Fatal(err)
	}
	ck.advance(11 * time.Second)
	if n := c.Tick(); n != 1 {
		t.Fatalf("tick past the timeout completed %d", n)
	}
	if err := c.AddImplicit(p.ID, p.Epoch, tp0); !errors.Is(err, ErrAbortable) {
		t.Fatalf("produce after the timeout abort: %v, want abortable", err)
	}
	if err := c.CommitOffsetsImplicit("etl", p.ID, p.Epoch, []Offset{{Group: "g", Topic: "in"}}); !errors.Is(err, ErrAbortable) {
		t.Fatalf("offsets after the timeout abort: %v, want abortable", err)
	}
	if err := c.AddGroupAbortable("etl", p.ID, p.Epoch, "g"); !errors.Is(err, ErrAbortable) {
		t.Fatalf("AddOffsetsToTxn v4 after the timeout abort: %v, want abortable", err)
	}
	if err := c.AddGroup("etl", p.ID, p.Epoch, "g"); !errors.Is(err, ErrFenced) {
		t.Fatalf("AddOffsetsToTxn v3 after the timeout abort: %v, want fenced as before", err)
	}
	if _, err := c.EndTxnBump("etl", p.ID, p.Epoch, true); !errors.Is(err, ErrAbortable) {
		t.Fatalf("commit after the timeout abort: %v, want abortable", err)
	}
	cur, err := c.EndTxnBump("etl", p.ID, p.Epoch, false)
	if err != nil || cur != (Producer{ID: p.ID, Epoch: p.Epoch + 1}) {
		t.Fatalf("abort after the timeout abort: %+v %v, want the bumped epoch", cur, err)
	}
	if err := c.AddImplicit(cur.ID, cur.Epoch, tp0); err != nil {
		t.Fatalf("the next transaction: %v", err)
	}
	if _, err := c.EndTxnBump("etl", p.ID, p.Epoch, false); !errors.Is(err, ErrFenced) {
		t.Fatalf("the old epoch once the next transaction began: %v, want fenced", err)
	}
}

// TestEndTxnBumpOverflow: the bump past the last epoch gives a new
// producer id at epoch 0; the markers name the old id (its batches') at
// the highest epoch, and the old id is fenced from then on.
func TestEndTxnBumpOverflow(t *testing.T) {
	fx, ck := &fakeEffects{}, &clock{t: time.Unix(1000, 0)}
	c := open(t, newMem(t), fx, ck)
	p, _ := c.InitProducerID("etl", 10*time.Second, noProducer)
	fx.epochs["etl"] = Producer{ID: p.ID, Epoch: math.MaxInt16 - 1}
	p, err := c.InitProducerID("etl", 10*time.Second, p)
	if err != nil || p.Epoch != math.MaxInt16 {
		t.Fatalf("re-init: %+v %v", p, err)
	}
	if err := c.AddImplicit(p.ID, p.Epoch, tp0); err != nil {
		t.Fatal(err)
	}
	next, err := c.EndTxnBump("etl", p.ID, p.Epoch, true)
	if err != nil || next.ID == p.ID || next.Epoch != 0 {
		t.Fatalf("commit at the last epoch: %+v %v, want a new id at epoch 0", next, err)
	}
	if m := fx.markers; len(m) != 1 || m[0].pid != p.ID || m[0].epoch != math.MaxInt16 {
		t.Fatalf("markers %+v, want the old id at epoch %d", m, math.MaxInt16)
	}
	if again, err := c.EndTxnBump("etl", p.ID, p.Epoch, true); err != nil || again != next {
		t.Fatalf("retry with the old id: %+v %v, want %+v", again, err, next)
	}
	if err := c.AddImplicit(p.ID, p.Epoch, tp0); !errors.Is(err, ErrIDMapping) {
		t.Fatalf("late produce with the old id: %v, want its mapping refused", err)
	}
	if err := c.AddImplicit(next.ID, next.Epoch, tp0); err != nil {
		t.Fatalf("the new id: %v", err)
	}
}

// TestEndTxnBumpDurable: what EndTxn v5 adds (Ended) survives a reopen,
// so a retry after a restart is still answered as one.
func TestEndTxnBumpDurable(t *testing.T) {
	fx, ck := &fakeEffects{}, &clock{t: time.Unix(1000, 0)}
	fsys := newMem(t)
	c := open(t, fsys, fx, ck)
	p, _ := c.InitProducerID("etl", 10*time.Second, noProducer)
	_ = c.AddImplicit(p.ID, p.Epoch, tp0)
	next, err := c.EndTxnBump("etl", p.ID, p.Epoch, true)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	c = open(t, fsys, fx, ck)
	if again, err := c.EndTxnBump("etl", p.ID, p.Epoch, true); err != nil || again != next {
		t.Fatalf("retry after a reopen: %+v %v, want %+v", again, err, next)
	}
}

// TestEndTxnBumpReinit: a producer that never got EndTxn v5's answer
// re-inits (KIP-360) with the epoch it had: allowed, as Kafka allows its
// last epoch, and it gets one past the bumped one; an epoch older still
// is fenced.
func TestEndTxnBumpReinit(t *testing.T) {
	fx, ck := &fakeEffects{}, &clock{t: time.Unix(1000, 0)}
	c := open(t, newMem(t), fx, ck)
	p, _ := c.InitProducerID("etl", 10*time.Second, noProducer)
	_ = c.AddImplicit(p.ID, p.Epoch, tp0)
	next, err := c.EndTxnBump("etl", p.ID, p.Epoch, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.InitProducerID("etl", 10*time.Second, Producer{ID: p.ID, Epoch: p.Epoch - 1}); !errors.Is(err, ErrFenced) {
		t.Fatalf("re-init two epochs back: %v, want fenced", err)
	}
	again, err := c.InitProducerID("etl", 10*time.Second, p)
	if err != nil || again.ID != p.ID || again.Epoch != next.Epoch+1 {
		t.Fatalf("re-init with the epoch the EndTxn ended: %+v %v, want epoch %d", again, err, next.Epoch+1)
	}
}
