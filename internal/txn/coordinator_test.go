package txn

import (
	"errors"
	"testing"
	"time"
)

var tp0, tp1 = Partition{"out", 0}, Partition{"out", 1}

// TestTransitions walks one transactional id through Kafka's states, each
// step answered as Kafka answers it.
func TestTransitions(t *testing.T) {
	fx, ck := &fakeEffects{}, &clock{t: time.Unix(1000, 0)}
	c := open(t, newMem(t), fx, ck)
	p, err := c.InitProducerID("etl", 10*time.Second, noProducer)
	if err != nil || p.Epoch != 0 {
		t.Fatalf("init: %v %v", p, err)
	}
	steps := []struct {
		name string
		do   func() error
		want error
		st   State
	}{
		{"end with nothing open", func() error { return c.EndTxn("etl", p.ID, p.Epoch, true) }, ErrInvalidState, Empty},
		{"produce before add", func() error { return c.Verify(p.ID, p.Epoch, tp0) }, ErrInvalidState, Empty},
		{"add, wrong pid", func() error { return c.AddPartitions("etl", p.ID+1, p.Epoch, []Partition{tp0}) }, ErrIDMapping, Empty},
		{"add, unknown id", func() error { return c.AddPartitions("nope", p.ID, p.Epoch, []Partition{tp0}) }, ErrIDMapping, Empty},
		{"add, old epoch", func() error { return c.AddPartitions("etl", p.ID, p.Epoch-1, []Partition{tp0}) }, ErrFenced, Empty},
		{"add", func() error { return c.AddPartitions("etl", p.ID, p.Epoch, []Partition{tp0}) }, nil, Ongoing},
		{"produce added", func() error { return c.Verify(p.ID, p.Epoch, tp0) }, nil, Ongoing},
		{"produce not added", func() error { return c.Verify(p.ID, p.Epoch, tp1) }, ErrInvalidState, Ongoing},
		{"produce old epoch", func() error { return c.Verify(p.ID, p.Epoch-1, tp0) }, ErrFenced, Ongoing},
		{"offsets before group", func() error {
			return c.CommitOffsets("etl", p.ID, p.Epoch, []Offset{{Group: "g", Topic: "in", Offset: 5}})
		}, ErrInvalidState, Ongoing},
		{"add group", func() error { return c.AddGroup("etl", p.ID, p.Epoch, "g") }, nil, Ongoing},
		{"offsets", func() error {
			return c.CommitOffsets("etl", p.ID, p.Epoch, []Offset{{Group: "g", Topic: "in", Offset: 5}})
		}, nil, Ongoing},
		{"commit", func() error { return c.EndTxn("etl", p.ID, p.Epoch, true) }, nil, CompleteCommit},
		{"commit again (retry)", func() error { return c.EndTxn("etl", p.ID, p.Epoch, true) }, nil, CompleteCommit},
		{"abort after commit", func() error { return c.EndTxn("etl", p.ID, p.Epoch, false) }, ErrInvalidState, CompleteCommit},
		{"next txn", func() error { return c.AddPartitions("etl", p.ID, p.Epoch, []Partition{tp1}) }, nil, Ongoing},
		{"abort", func() error { return c.EndTxn("etl", p.ID, p.Epoch, false) }, nil, CompleteAbort},
		{"abort again (retry)", func() error { return c.EndTxn("etl", p.ID, p.Epoch, false) }, nil, CompleteAbort},
	}
	for _, s := range steps {
		if err := s.do(); !errors.Is(err, s.want) || (s.want == nil && err != nil) {
			t.Fatalf("%s: err %v, want %v", s.name, err, s.want)
		}
		got, _ := c.Describe([]string{"etl"})
		if got[0].State != s.st {
			t.Fatalf("%s: state %v, want %v", s.name, got[0].State, s.st)
		}
	}
	want := []marker{{p.ID, p.Epoch, true, []Partition{tp0}}, {p.ID, p.Epoch, false, []Partition{tp1}}}
	if len(fx.markers) != 2 || fx.markers[0].commit != want[0].commit || fx.markers[1].commit != want[1].commit ||
		fx.markers[0].parts[0] != tp0 || fx.markers[1].parts[0] != tp1 {
		t.Fatalf("markers %+v, want %+v", fx.markers, want)
	}
	if len(fx.offsets) != 1 || fx.offsets[0].Offset != 5 {
		t.Fatalf("offsets applied %+v, want the one committed (the aborted txn had none)", fx.offsets)
	}
}

// TestInitFencesAndAborts: a second InitProducerID bumps the epoch, aborts
// what the first instance left open, and fences it everywhere.
func TestInitFencesAndAborts(t *testing.T) {
	fx, ck := &fakeEffects{}, &clock{t: time.Unix(1000, 0)}
	c := open(t, newMem(t), fx, ck)
	old, _ := c.InitProducerID("etl", 10*time.Second, noProducer)
	if err := c.AddPartitions("etl", old.ID, old.Epoch, []Partition{tp0}); err != nil {
		t.Fatal(err)
	}
	cur, err := c.InitProducerID("etl", 10*time.Second, noProducer)
	if err != nil || cur.ID != old.ID || cur.Epoch != old.Epoch+1 {
		t.Fatalf("re-init: %v %v", cur, err)
	}
	if len(fx.markers) != 1 || fx.markers[0].commit || fx.markers[0].epoch != cur.Epoch {
		t.Fatalf("markers %+v: want one abort at the new epoch", fx.markers)
	}
	for name, err := range map[string]error{
		"end":     c.EndTxn("etl", old.ID, old.Epoch, true),
		"add":     c.AddPartitions("etl", old.ID, old.Epoch, []Partition{tp0}),
		"produce": c.Verify(old.ID, old.Epoch, tp0),
		"group":   c.AddGroup("etl", old.ID, old.Epoch, "g"),
	} {
		if !errors.Is(err, ErrFenced) {
			t.Errorf("zombie %s: %v, want fenced", name, err)
		}
	}
	if _, err := c.InitProducerID("etl", 10*time.Second, Producer{ID: old.ID, Epoch: old.Epoch - 1}); !errors.Is(err, ErrFenced) {
		t.Errorf("re-init with a stale epoch: %v, want fenced", err)
	}
	if _, err := c.InitProducerID("etl", 2*time.Minute, noProducer); !errors.Is(err, ErrInvalidTimeout) {
		t.Errorf("timeout over the maximum: %v", err)
	}
}

// TestTimeoutAborts: a transaction open past its timeout is aborted by
// Tick with a bumped epoch; the producer that left it is fenced but may
// re-init naming its old epoch.
func TestTimeoutAborts(t *testing.T) {
	fx, ck := &fakeEffects{}, &clock{t: time.Unix(1000, 0)}
	c := open(t, newMem(t), fx, ck)
	p, _ := c.InitProducerID("etl", 10*time.Second, noProducer)
	if err := c.AddPartitions("etl", p.ID, p.Epoch, []Partition{tp0}); err != nil {
		t.Fatal(err)
	}
	ck.advance(10 * time.Second)
	if n := c.Tick(); n != 0 {
		t.Fatalf("tick at the timeout completed %d", n)
	}
	ck.advance(time.Millisecond)
	if n := c.Tick(); n != 1 {
		t.Fatalf("tick past the timeout completed %d, want 1", n)
	}
	got, _ := c.Describe([]string{"etl"})
	if got[0].State != CompleteAbort || got[0].Epoch != p.Epoch+1 || len(fx.markers) != 1 || fx.markers[0].commit {
		t.Fatalf("after timeout: %+v markers %+v", got[0], fx.markers)
	}
	if err := c.EndTxn("etl", p.ID, p.Epoch, true); !errors.Is(err, ErrFenced) {
		t.Fatalf("commit after timeout: %v, want fenced", err)
	}
	if np, err := c.InitProducerID("etl", 10*time.Second, p); err != nil || np.Epoch != p.Epoch+2 {
		t.Fatalf("re-init with the epoch bumped away: %v %v", np, err)
	}
}

// TestMarkerFailureRetried: markers that fail leave the decision durable;
// the producer waits (CONCURRENT_TRANSACTIONS) until Tick writes them.
func TestMarkerFailureRetried(t *testing.T) {
	fx, ck := &fakeEffects{}, &clock{t: time.Unix(1000, 0)}
	c := open(t, newMem(t), fx, ck)
	p, _ := c.InitProducerID("etl", 10*time.Second, noProducer)
	_ = c.AddPartitions("etl", p.ID, p.Epoch, []Partition{tp0})
	fx.fail = errors.New("disk gone")
	if err := c.EndTxn("etl", p.ID, p.Epoch, true); err != nil {
		t.Fatalf("commit with markers failing: %v (the decision is durable: success)", err)
	}
	if err := c.AddPartitions("etl", p.ID, p.Epoch, []Partition{tp0}); !errors.Is(err, ErrConcurrent) {
		t.Fatalf("next txn while markers are pending: %v, want concurrent", err)
	}
	if n := c.Tick(); n != 0 {
		t.Fatalf("tick with markers failing completed %d", n)
	}
	fx.fail = nil
	if n := c.Tick(); n != 1 || len(fx.markers) != 1 || !fx.markers[0].commit {
		t.Fatalf("tick: %d, markers %+v", n, fx.markers)
	}
}

// TestListAndDescribe filters by state and producer id.
func TestListAndDescribe(t *testing.T) {
	fx, ck := &fakeEffects{}, &clock{t: time.Unix(1000, 0)}
	c := open(t, newMem(t), fx, ck)
	a, _ := c.InitProducerID("a", time.Second, noProducer)
	b, _ := c.InitProducerID("b", time.Second, noProducer)
	_ = c.AddPartitions("b", b.ID, b.Epoch, []Partition{tp0})
	if l := c.List(Filter{States: []State{Ongoing}}); len(l) != 1 || l[0].ID != "b" {
		t.Fatalf("ongoing: %+v", l)
	}
	if l := c.List(Filter{ProducerIDs: []int64{a.ID}}); len(l) != 1 || l[0].ID != "a" {
		t.Fatalf("by pid: %+v", l)
	}
	if _, missing := c.Describe([]string{"a", "zz"}); len(missing) != 1 || missing[0] != "zz" {
		t.Fatalf("missing %v", missing)
	}
	if s, ok := ParseState("prepareCOMMIT"); !ok || s != PrepareCommit {
		t.Fatal("ParseState")
	}
}

// TestIDExpiration: an id idle past transactional.id.expiration.ms is
// forgotten, durably, and its producer id dropped; one in use is kept.
func TestIDExpiration(t *testing.T) {
	mem := newMem(t)
	fx, ck := &fakeEffects{}, &clock{t: time.Unix(1000, 0)}
	c := open(t, mem, fx, ck)
	old, _ := c.InitProducerID("old", time.Second, noProducer)
	ck.advance(DefaultIDExpiration - time.Hour)
	used, _ := c.InitProducerID("used", time.Second, noProducer)
	ck.advance(time.Hour + time.Millisecond)
	c.Tick()
	if _, missing := c.Describe([]string{"old", "used"}); len(missing) != 1 || missing[0] != "old" {
		t.Fatalf("missing %v, want [old]", missing)
	}
	if err := c.Verify(old.ID, old.Epoch, tp0); !errors.Is(err, ErrIDMapping) {
		t.Fatalf("expired id's producer: %v", err)
	}
	if _, ok := fx.epochs["old"]; ok {
		t.Fatal("the producer id was not forgotten")
	}
	c.Close()
	c = open(t, mem, fx, ck)
	if _, missing := c.Describe([]string{"old", "used"}); len(missing) != 1 {
		t.Fatalf("after reopen: missing %v, want [old]", missing)
	}
	if p, err := c.InitProducerID("old", time.Second, noProducer); err != nil || p.ID == old.ID || p.Epoch != 0 {
		t.Fatalf("re-init of an expired id: %v %v, want a fresh id at epoch 0", p, err)
	}
	_ = used
}
