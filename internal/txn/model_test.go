package txn

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// model is the reference the coordinator is checked against: Kafka's
// transitions written as plainly as possible, with no durability.
type model struct {
	txns    map[string]*Txn
	next    int64
	markers int
	offsets int
}

func (m *model) check(id string, pid int64, epoch int16) (*Txn, error) {
	t := m.txns[id]
	switch {
	case t == nil || t.ProducerID != pid:
		return nil, ErrIDMapping
	case t.Epoch != epoch:
		return nil, ErrFenced
	}
	return t, nil
}

func (m *model) begin(t *Txn, now time.Time) {
	if t.State != Ongoing {
		t.State, t.Partitions, t.Groups, t.Offsets, t.Started = Ongoing, nil, nil, nil, now
	}
}

func (m *model) finish(t *Txn, commit bool) {
	m.markers++ // asked even with no partition (a transaction of offsets only)
	if commit {
		m.offsets += len(t.Offsets)
	}
	t.State = CompleteAbort
	if commit {
		t.State = CompleteCommit
	}
	t.Partitions, t.Groups, t.Offsets, t.Started = nil, nil, nil, time.Time{}
}

func (m *model) init(id string, timeout time.Duration, expect Producer) (Producer, error) {
	t := m.txns[id]
	if t == nil {
		t = &Txn{ID: id, ProducerID: m.next, Epoch: -1, LastEpoch: -1}
		m.next++
		m.txns[id] = t
	} else if expect.ID >= 0 && (expect.ID != t.ProducerID || expect.Epoch != t.Epoch && (t.LastEpoch < 0 || expect.Epoch != t.LastEpoch)) {
		return Producer{}, ErrFenced
	}
	if t.State == Ongoing {
		t.Epoch++ // the abort's bump is the new producer's epoch
		m.finish(t, false)
	} else {
		t.Epoch++
	}
	t.LastEpoch, t.Timeout = -1, timeout
	return Producer{t.ProducerID, t.Epoch}, nil
}

func (m *model) end(id string, pid int64, epoch int16, commit bool) error {
	t, err := m.check(id, pid, epoch)
	switch {
	case err != nil:
		return err
	case t.State == CompleteCommit && commit, t.State == CompleteAbort && !commit:
		return nil
	case t.State != Ongoing:
		return ErrInvalidState
	}
	m.finish(t, commit)
	return nil
}

func (m *model) tick(now time.Time) {
	for _, t := range m.txns {
		if t.State == Ongoing && now.Sub(t.Started) > t.Timeout {
			t.LastEpoch, t.Epoch = t.Epoch, t.Epoch+1
			m.finish(t, false)
		}
	}
}

// TestModel runs random operations, with stale and foreign producer ids
// and epochs, clock jumps past timeouts, and crashes (reopening from what a
// power cut leaves), against the coordinator and the model, comparing every
// answer and every state.
func TestModel(t *testing.T) {
	seeds, ops := 20, 400
	if testing.Short() {
		seeds = 4
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runModel(t, uint64(seed), ops) })
	}
}

func runModel(t *testing.T, seed uint64, ops int) {
	rng := rand.New(rand.NewPCG(seed, 98))
	mem := newMem(t)
	fx, ck := &fakeEffects{}, &clock{t: time.Unix(1000, 0)}
	c := open(t, mem, fx, ck)
	m := &model{txns: map[string]*Txn{}}
	ids := []string{"a", "b", "c"}
	parts := []Partition{tp0, tp1, {"x", 0}}
	held := map[string]Producer{} // what each id's producer holds, possibly stale
	pick := func(id string) (int64, int16) {
		p, ok := held[id]
		if !ok {
			return 99, 0
		}
		switch rng.IntN(8) {
		case 0:
			return p.ID, p.Epoch - 1
		case 1:
			return p.ID + 1, p.Epoch
		}
		return p.ID, p.Epoch
	}
	for i := range ops {
		id := ids[rng.IntN(len(ids))]
		pid, epoch := pick(id)
		part := parts[rng.IntN(len(parts))]
		var got, want error
		var what string
		switch op := rng.IntN(9); op {
		case 0:
			expect := noProducer
			if p, ok := held[id]; ok && rng.IntN(3) == 0 {
				expect = Producer{p.ID, p.Epoch - int16(rng.IntN(2))}
			}
			what = fmt.Sprintf("init %s expect %v", id, expect)
			gp, gerr := c.InitProducerID(id, 5*time.Second, expect)
			wp, werr := m.init(id, 5*time.Second, expect)
			got, want = gerr, werr
			if gerr == nil && werr == nil {
				if gp != wp {
					t.Fatalf("op %d %s: got %v, model %v", i, what, gp, wp)
				}
				held[id] = gp
			}
		case 1, 2:
			what = fmt.Sprintf("add %s %d/%d %v", id, pid, epoch, part)
			got = c.AddPartitions(id, pid, epoch, []Partition{part})
			if tx, err := m.check(id, pid, epoch); err != nil {
				want = err
			} else {
				m.begin(tx, ck.now())
				tx.addPartition(part)
			}
		case 3:
			what = fmt.Sprintf("group %s %d/%d", id, pid, epoch)
			got = c.AddGroup(id, pid, epoch, "g")
			if tx, err := m.check(id, pid, epoch); err != nil {
				want = err
			} else {
				m.begin(tx, ck.now())
				tx.addGroup("g")
			}
		case 4:
			o := Offset{Group: []string{"g", "h"}[rng.IntN(2)], Topic: "in", Offset: int64(i)}
			what = fmt.Sprintf("offsets %s %d/%d %s", id, pid, epoch, o.Group)
			got = c.CommitOffsets(id, pid, epoch, []Offset{o})
			if tx, err := m.check(id, pid, epoch); err != nil {
				want = err
			} else if tx.State != Ongoing || !tx.hasGroup(o.Group) {
				want = ErrInvalidState
			} else {
				tx.putOffset(o)
			}
		case 5:
			commit := rng.IntN(3) > 0
			what = fmt.Sprintf("end %s %d/%d commit %v", id, pid, epoch, commit)
			got, want = c.EndTxn(id, pid, epoch, commit), m.end(id, pid, epoch, commit)
		case 6:
			what = fmt.Sprintf("verify %d/%d %v", pid, epoch, part)
			got = c.Verify(pid, epoch, part)
			want = verifyModel(m, pid, epoch, part)
		case 7:
			d := time.Duration(rng.IntN(4000)) * time.Millisecond
			what = fmt.Sprintf("tick +%v", d)
			ck.advance(d)
			c.Tick()
			m.tick(ck.now())
		case 8:
			what = "crash"
			c.Close()
			crashed := mem.CrashClone()
			mem = crashed
			c = open(t, mem, fx, ck)
		}
		if (got == nil) != (want == nil) || (want != nil && !errors.Is(got, want)) {
			t.Fatalf("op %d %s: got %v, model %v", i, what, got, want)
		}
		compareModel(t, i, what, c, m)
	}
	if fx.markers == nil && m.markers > 0 || len(fx.markers) != m.markers || len(fx.offsets) != m.offsets {
		t.Fatalf("markers %d offsets %d, model %d %d", len(fx.markers), len(fx.offsets), m.markers, m.offsets)
	}
}

func verifyModel(m *model, pid int64, epoch int16, p Partition) error {
	for _, t := range m.txns {
		if t.ProducerID != pid {
			continue
		}
		switch {
		case t.Epoch != epoch:
			return ErrFenced
		case t.State != Ongoing || !t.HasPartition(p):
			return ErrInvalidState
		}
		return nil
	}
	return ErrIDMapping
}

func compareModel(t *testing.T, i int, what string, c *Coordinator, m *model) {
	t.Helper()
	got := c.List(Filter{})
	var want []Txn
	for _, id := range []string{"a", "b", "c"} {
		if tx := m.txns[id]; tx != nil {
			want = append(want, *tx)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("op %d %s: %d txns, model %d", i, what, len(got), len(want))
	}
	for k := range got {
		g, w := got[k], want[k]
		if g.ID != w.ID || g.ProducerID != w.ProducerID || g.Epoch != w.Epoch || g.State != w.State ||
			!slices.Equal(g.Partitions, w.Partitions) || !slices.Equal(g.Groups, w.Groups) ||
			!slices.Equal(g.Offsets, w.Offsets) || !g.Started.Equal(w.Started) {
			t.Fatalf("op %d %s:\n got %+v\nmodel %+v", i, what, g, w)
		}
	}
}
