package group

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// sim drives a coordinator with random membership changes and checks
// invariants after every step.
type sim struct {
	t       *testing.T
	rng     *rand.Rand
	c       *Coordinator
	now     time.Time
	mode    AssignMode
	ids     []string          // live member ids as the clients believe
	open    map[Ticket]string // tickets issued and not yet answered
	gen     map[string]int32  // member id -> generation it last joined
	counts  map[string]int32  // topic -> partitions
	lastGen int32
	durable *durableSim // set by newDurableSim (membership_test.go)
}

var simTopics = []string{"a", "b", "c"}

func newSim(t *testing.T, seed uint64, mode AssignMode) *sim {
	s := &sim{t: t, rng: rand.New(rand.NewPCG(seed, 7)), c: New(Config{}), now: epoch, mode: mode,
		open: map[Ticket]string{}, gen: map[string]int32{}, counts: map[string]int32{}}
	for _, topic := range simTopics {
		s.setPartitions(topic, int32(1+s.rng.IntN(6)))
	}
	return s
}

func (s *sim) setPartitions(topic string, n int32) {
	s.counts[topic] = n
	s.deliver(s.c.SetPartitions(s.now, topic, n))
}

// deliver checks every answer is for an open ticket and answered once.
func (s *sim) deliver(out Output) {
	answer := func(t Ticket, err error, member string, gen int32) {
		if _, ok := s.open[t]; !ok {
			s.t.Fatalf("ticket %d answered but not open (dup or unknown)", t)
		}
		delete(s.open, t)
		if err == nil || errors.Is(err, ErrMemberIDRequired) {
			s.gen[member] = gen
			if !containsStr(s.ids, member) {
				s.ids = append(s.ids, member)
			}
		}
	}
	for _, r := range out.Joins {
		if s.durable != nil && r.Err == nil && s.mode == BrokerAssigns {
			s.durable.assigned(r.MemberID, r.Generation)
		}
		answer(r.Ticket, r.Err, r.MemberID, r.Generation)
	}
	for _, r := range out.Syncs {
		if s.durable != nil && r.Err == nil {
			s.durable.assigned(s.open[r.Ticket], s.gen[s.open[r.Ticket]])
		}
		answer(r.Ticket, r.Err, "", 0)
	}
	if s.durable != nil {
		s.durable.pending = append(s.durable.pending, out.Events...)
	}
}

func containsStr(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func (s *sim) join(id string) {
	s.joinAs(id, "", false)
}

// joinAs joins as id (new when ""), optionally as a static instance or
// the v4+ way (member id required first).
func (s *sim) joinAs(id, instance string, v4 bool) {
	topics := []string{simTopics[s.rng.IntN(3)]}
	if s.rng.IntN(2) == 0 {
		topics = simTopics
	}
	tk, out := s.c.Join(s.now, JoinRequest{Group: "g", MemberID: id, InstanceID: instance, ClientID: "c", Mode: s.mode,
		ProtocolType: "consumer", Protocols: []Protocol{{Name: AssignorRange}, {Name: AssignorRoundRobin}},
		Topics: topics, SessionTimeout: 10 * time.Second, RebalanceTimeout: 20 * time.Second,
		RequireKnownMemberID: v4})
	s.open[tk] = id
	s.deliver(out)
}

// commit tries a commit as id and checks the fence: it may succeed only
// for a current member of the current generation outside
// CompletingRebalance, or with generation -1 on an Empty group.
func (s *sim) commit(id string) {
	g := s.c.groups["g"]
	var state State
	var gen int32
	member := false
	if g != nil {
		state, gen, member = g.state, g.generation, g.members[id] != nil
	}
	_, _, err := s.c.Commit(s.now, CommitRequest{Group: "g", MemberID: id, Generation: s.gen[id],
		Offsets: []OffsetCommit{{Topic: "a", Partition: 0, Offset: int64(s.rng.IntN(100))}}})
	outside := s.gen[id] < 0 && (g == nil || state == Empty) // manual offset management
	managed := member && s.gen[id] == gen && state != CompletingRebalance
	if managed && err != nil {
		s.t.Fatalf("commit by current member %s gen %d refused: %v", id, gen, err)
	}
	if err == nil && !outside && !managed {
		s.t.Fatalf("commit by %s gen %d accepted: member=%v group gen %d state %s", id, s.gen[id], member, gen, state)
	}
}

// step performs one random action.
func (s *sim) step() {
	pick := func() string {
		if len(s.ids) == 0 {
			return ""
		}
		return s.ids[s.rng.IntN(len(s.ids))]
	}
	switch op := s.rng.IntN(13); {
	case op < 2:
		s.join("")
	case op == 10:
		s.joinAs("", fmt.Sprintf("i%d", s.rng.IntN(3)), false)
	case op == 11:
		s.joinAs("", "", true)
	case op == 12:
		if id := pick(); id != "" {
			s.commit(id)
		}
	case op < 5:
		if id := pick(); id != "" {
			s.join(id)
		}
	case op < 6:
		if id := pick(); id != "" {
			_, out := s.c.Leave(s.now, "g", []MemberRef{{MemberID: id}})
			s.deliver(out)
		}
	case op < 7:
		s.setPartitions(simTopics[s.rng.IntN(3)], int32(1+s.rng.IntN(8)))
	case op < 8:
		if id := pick(); id != "" {
			tk, out := s.c.Sync(s.now, SyncRequest{Group: "g", MemberID: id, Generation: s.gen[id],
				Assignments: map[string][]byte{id: []byte("x")}})
			s.open[tk] = id
			s.deliver(out)
		}
	default:
		for _, id := range s.ids {
			_ = s.c.Heartbeat(s.now, HeartbeatRequest{Group: "g", MemberID: id, Generation: s.gen[id]})
		}
		s.now = s.now.Add(time.Duration(1+s.rng.IntN(12)) * time.Second)
		s.deliver(s.c.Tick(s.now))
	}
	s.check()
}

// check asserts the ownership invariants.
func (s *sim) check() {
	info, ok := s.c.Describe("g")
	if !ok {
		// Tick forgets an Empty group without offsets; a new one starts
		// at generation 0, safe because member ids are never reused.
		s.lastGen = 0
		return
	}
	if info.Generation < s.lastGen {
		s.t.Fatalf("generation went back from %d to %d", s.lastGen, info.Generation)
	}
	s.lastGen = info.Generation
	owner := map[string]string{}
	subscribed := map[string]bool{}
	for _, m := range info.Members {
		for _, tp := range m.Partitions {
			for _, p := range tp.Partitions {
				key := fmt.Sprintf("%s/%d", tp.Topic, p)
				if prev, dup := owner[key]; dup {
					s.t.Fatalf("%s owned by %s and %s", key, prev, m.MemberID)
				}
				owner[key] = m.MemberID
			}
		}
		for _, topic := range s.c.groups["g"].members[m.MemberID].topics {
			subscribed[topic] = true
		}
	}
	if info.State != Stable || s.mode != BrokerAssigns {
		return
	}
	want := 0
	for topic := range subscribed {
		want += int(s.counts[topic])
		for p := range s.counts[topic] {
			if _, ok := owner[fmt.Sprintf("%s/%d", topic, p)]; !ok {
				s.t.Fatalf("Stable generation %d: %s/%d has no owner", info.Generation, topic, p)
			}
		}
	}
	if len(owner) != want {
		s.t.Fatalf("Stable: %d partitions owned, %d exist", len(owner), want)
	}
}

// settle drives the group to quiet: everyone rejoins, then time passes
// until every ticket is answered. Bounded: a stuck ticket fails the test.
func (s *sim) settle() {
	for _, id := range s.ids {
		s.join(id)
	}
	for range 20 {
		if s.durable != nil {
			s.advance() // Stable records Stored: their tickets answered
		}
		if len(s.open) == 0 {
			return
		}
		s.now = s.now.Add(30 * time.Second)
		s.deliver(s.c.Tick(s.now))
		s.check()
	}
	s.t.Fatalf("tickets never answered: %v", s.open)
}

func TestPropertyOwnership(t *testing.T) {
	for _, mode := range []AssignMode{BrokerAssigns, LeaderAssigns} {
		for seed := range uint64(60) {
			t.Run(fmt.Sprintf("mode%d/seed%d", mode, seed), func(t *testing.T) {
				s := newSim(t, seed, mode)
				for range 300 {
					s.step()
				}
				s.settle()
			})
		}
	}
}

// FuzzCoordinatorOps runs the random-operation simulation from fuzzed
// seeds: no sequence of joins, syncs, leaves, partition changes and ticks
// may panic, answer a ticket twice, leave one unanswered, or give a
// partition two owners.
func FuzzCoordinatorOps(f *testing.F) {
	f.Add(uint64(1), uint64(2), uint16(200), false)
	f.Add(uint64(42), uint64(7), uint16(500), true)
	f.Fuzz(func(t *testing.T, seed, mix uint64, steps uint16, broker bool) {
		mode := LeaderAssigns
		if broker {
			mode = BrokerAssigns
		}
		s := newSim(t, seed^mix<<1, mode)
		for range steps % 1000 {
			s.step()
		}
		s.settle()
	})
}
