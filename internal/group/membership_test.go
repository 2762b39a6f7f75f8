package group

import (
	"fmt"
	"os"
	"strconv"
	"testing"
)

// durableSim is the random simulation of property_test.go with
// Config.DurableMembership, a log that makes the emitted events durable
// some steps later (Stored then called for each Stable record, as the
// broker does once its entry commits), and coordinator failovers: a new
// coordinator replayed from the durable events only, every open ticket
// lost with the old one.
type durableSim struct {
	pending   []Event // emitted, not durable yet
	failovers int
	log       []Event          // durable
	shadow    *Coordinator     // log replayed, one event at a time
	held      map[string]int32 // member -> generation of its last assignment answered
	// off: the coordinator records no membership yet (RecordMemberships not called), so
	// the log's replay has none to compare.
	off bool
}

func (d *durableSim) assigned(member string, gen int32) { d.held[member] = gen }

func newDurableSim(t *testing.T, seed uint64, mode AssignMode) *sim {
	s := newSim(t, seed, mode)
	s.c = New(Config{DurableMembership: true, Incarnation: "0"})
	s.durable = &durableSim{held: map[string]int32{}, shadow: New(Config{DurableMembership: true})}
	for topic, n := range s.counts {
		s.setPartitions(topic, n)
	}
	return s
}

// advance makes every pending event durable and reports the Stable
// records Stored.
func (s *sim) advance() {
	for len(s.durable.pending) > 0 {
		evs := s.durable.pending
		s.durable.pending = nil
		s.durable.log = append(s.durable.log, evs...)
		for _, ev := range evs {
			replayOne(s.t, s.durable.shadow, ev)
		}
		for _, ev := range evs {
			if ev.Type == EventGroupMembers && ev.Members.State == Stable {
				s.deliver(s.c.Stored(s.now, ev.Group, ev.Members.Generation))
			}
		}
	}
	if !s.durable.off {
		s.compareReplayed()
	}
}

// compareReplayed checks that a coordinator replayed from the durable
// events has the live one's membership (called with nothing pending, so
// only a group still storing may differ: it is recorded as Stable).
func (s *sim) compareReplayed() {
	s.t.Helper()
	live, _ := s.c.Describe("g")
	got, _ := s.durable.shadow.Describe("g")
	if live.State == Empty || live.State == Dead {
		if got.State != Empty && got.State != Dead || len(got.Members) > 0 {
			s.t.Fatalf("live group %s, replayed %s with %d members", live.State, got.State, len(got.Members))
		}
		return
	}
	if g := s.c.groups["g"]; g.storing {
		live.State = Stable
	}
	same := live.Generation == got.Generation && live.State == got.State && live.Leader == got.Leader &&
		live.Protocol == got.Protocol && len(live.Members) == len(got.Members)
	for i := 0; same && i < len(live.Members); i++ {
		a, b := live.Members[i], got.Members[i]
		same = a.MemberID == b.MemberID && a.InstanceID == b.InstanceID && string(a.Assignment) == string(b.Assignment) &&
			fmt.Sprint(a.Partitions) == fmt.Sprint(b.Partitions)
		// A member rejoining during a rebalance may change its protocols; the
		// record of the generation that forms has them (they are re-sent anyway).
		same = same && (live.State == PreparingRebalance || string(a.Metadata) == string(b.Metadata))
	}
	if !same {
		s.t.Fatalf("replayed membership differs:\n live %+v\n replayed %+v", live, got)
	}
}

// failover replaces the coordinator with one replayed from the durable
// events, and checks that every member holding an assignment of the old
// coordinator's generation is in the new one at that generation (Stable,
// or rebalancing after it).
func (s *sim) failover() {
	s.t.Helper()
	s.durable.failovers++ // a new incarnation: member ids are never handed out twice
	c := replayedWith(s.t, Config{DurableMembership: true, Incarnation: fmt.Sprint(s.durable.failovers)}, s.durable.log)
	for topic, n := range s.counts {
		c.KnowPartitions(topic, n)
	}
	old := s.c.groups["g"]
	if g := c.groups["g"]; old != nil {
		for id := range old.members {
			if gen, ok := s.durable.held[id]; !ok || gen != old.generation || (old.state != Stable && old.state != PreparingRebalance) {
				continue // it holds no assignment of the old coordinator's current generation
			}
			if inst := old.members[id].instanceID; inst != "" && g != nil && g.static[inst] != "" && g.generation == old.generation {
				// A static member's new id, answered at once with the old id's
				// assignment: the new coordinator knows the old id, which nobody
				// else uses, and the new one rejoins (UNKNOWN_MEMBER_ID).
				continue
			}
			if g == nil || g.generation != old.generation || g.members[id] == nil || (g.state != Stable && g.state != PreparingRebalance) {
				s.t.Fatalf("member %s was answered its assignment of generation %d; the new coordinator has %+v", id, old.generation, g)
			}
		}
	}
	s.c = c
	s.durable.pending = nil
	clear(s.open) // the answers were lost with the old coordinator: the clients retry
	s.deliver(c.Resume(s.now))
	s.lastGen = 0
	if info, ok := c.Describe("g"); ok {
		s.lastGen = info.Generation
	}
}

// TestDurableMembershipFailover: random joins, syncs, leaves, partition
// changes and ticks against a coordinator with DurableMembership, with
// failovers to a coordinator replayed from what was durable. After every
// advance the replayed membership equals the live one; at every failover
// no member holds an assignment the new coordinator does not know; and
// the usual invariants (one owner per partition, every ticket answered
// once) hold throughout, across the failovers.
func TestDurableMembershipFailover(t *testing.T) {
	for _, mode := range []AssignMode{BrokerAssigns, LeaderAssigns} {
		for seed := range uint64(envSeeds(40)) {
			t.Run(fmt.Sprintf("mode%d/seed%d", mode, seed), func(t *testing.T) {
				if s := newDurableSim(t, seed, mode); s.runDurable(400) == 0 {
					t.Fatal("no failover drawn")
				}
			})
		}
	}
}

// TestRecordMembershipsMidway: a coordinator that ran without records (a
// cluster below meta.LevelGroupMembers) turns them on at a random step
// (RecordMemberships, once every node reads them): from the records it
// returns then, plus everything after, a replayed coordinator has the
// live membership, and failovers from then on keep every member that holds
// an assignment.
func TestRecordMembershipsMidway(t *testing.T) {
	for _, mode := range []AssignMode{BrokerAssigns, LeaderAssigns} {
		for seed := range uint64(envSeeds(40)) {
			t.Run(fmt.Sprintf("mode%d/seed%d", mode, seed), func(t *testing.T) {
				s := newDurableSim(t, seed, mode)
				s.c = New(Config{Incarnation: "0"})
				for topic, n := range s.counts {
					s.c.KnowPartitions(topic, n)
				}
				s.durable.off = true
				for range s.rng.IntN(200) {
					s.step()
					if s.rng.IntN(3) == 0 {
						s.advance()
					}
				}
				s.deliver(s.c.RecordMemberships())
				s.durable.off = false
				s.advance()
				if out := s.c.RecordMemberships(); len(out.Events) > 0 {
					t.Fatalf("a second RecordMemberships recorded %d events", len(out.Events))
				}
				s.runDurable(300)
			})
		}
	}
}

// replayedWith is replayed (event_test.go) with a configuration.
func replayedWith(t *testing.T, cfg Config, evs []Event) *Coordinator {
	t.Helper()
	c := New(cfg)
	for _, ev := range evs {
		replayOne(t, c, ev)
	}
	return c
}

// replayOne applies ev to c through its encoding, as a journal replays it.
func replayOne(t *testing.T, c *Coordinator, ev Event) {
	t.Helper()
	raw, err := ev.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	dec, err := UnmarshalEvent(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(dec); err != nil {
		t.Fatal(err)
	}
}

// FuzzDurableMembership runs the durable simulation from fuzzed seeds: no
// sequence of operations, advances and failovers may panic, answer a
// ticket twice, give a partition two owners, or leave a member holding an
// assignment the next coordinator does not know.
func FuzzDurableMembership(f *testing.F) {
	f.Add(uint64(1), uint16(300), false)
	f.Add(uint64(9), uint16(500), true)
	f.Fuzz(func(t *testing.T, seed uint64, steps uint16, broker bool) {
		mode := LeaderAssigns
		if broker {
			mode = BrokerAssigns
		}
		newDurableSim(t, seed, mode).runDurable(int(steps % 800))
	})
}

// runDurable takes steps random steps, making the log durable now and
// then and failing over now and then, settles, and returns the failovers.
func (s *sim) runDurable(steps int) (failovers int) {
	for range steps {
		s.step()
		switch r := s.rng.IntN(20); {
		case r < 6:
			s.advance()
		case r == 6:
			s.failover()
			failovers++
		}
	}
	s.settle()
	return failovers
}

// envSeeds is SLUICE_GROUP_SEEDS, or def: a longer run by hand.
func envSeeds(def int) int {
	if n, err := strconv.Atoi(os.Getenv("SLUICE_GROUP_SEEDS")); err == nil && n > 0 {
		return n
	}
	return def
}
