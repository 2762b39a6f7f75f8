package group

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// csim drives a consumer group with random clients: joins, leaves,
// crashes, slow revocations, static restarts, topics growing, time
// passing. The reference it is checked against is what a client may
// believe: the partitions live clients hold (given by an answer, not yet
// given up) never overlap, and once every client answers promptly the
// group converges to every partition of the subscribed topics held
// exactly once, balanced within one.
type csim struct {
	t       *testing.T
	rng     *rand.Rand
	c       *Coordinator
	now     time.Time
	clients map[string]*simClient
	counts  map[string]int32
	next    int
	shadow  *Coordinator // durable mode (consumer_record_test.go): every event replayed, in order
}

type simClient struct {
	cclient
	slow     bool  // keeps revoked partitions a while before releasing them
	revoking tpSet // given up by the coordinator, still held by the client
	lastBeat time.Time
	topics   []string
}

const simSession = 10 * time.Second

func newCsim(t *testing.T, seed uint64, assignor string) *csim {
	s := &csim{t: t, rng: rand.New(rand.NewPCG(seed, 848)), now: epoch, clients: map[string]*simClient{}, counts: map[string]int32{}}
	s.c = New(Config{Consumer: ConsumerConfig{SessionTimeout: simSession, Assignors: []string{assignor}}})
	for _, topic := range []string{"a", "b"} {
		s.counts[topic] = int32(1 + s.rng.IntN(6))
		s.c.SetPartitions(s.now, topic, s.counts[topic])
	}
	return s
}

// held is what the client uses: its assignment and what it still revokes.
func (cl *simClient) held() tpSet {
	h := tpSet{}
	for tp := range cl.owned {
		h[tp] = true
	}
	for tp := range cl.revoking {
		h[tp] = true
	}
	return h
}

func (s *csim) join(inst *string) {
	s.next++
	id := fmt.Sprintf("m%d", s.next)
	topics := []string{"a", "b"}
	if s.rng.IntN(3) == 0 {
		topics = []string{"a"}
	}
	req := joinReq(id, topics...)
	req.InstanceID = inst
	req.RebalanceTimeout = 5 * time.Second
	res, out := s.c.ConsumerHeartbeat(s.now, req)
	s.removed(out)
	if res.Err != nil {
		return // e.g. an instance id still held
	}
	cl := &simClient{cclient: cclient{id: res.MemberID, inst: inst, owned: tpSet{}}, slow: s.rng.IntN(3) == 0, lastBeat: s.now, topics: topics}
	s.clients[cl.id] = cl
	s.answer(cl, res)
}

// answer applies a heartbeat's answer as a client does: new partitions
// are used at once, revoked ones are given up now or (slow) later.
func (s *csim) answer(cl *simClient, res ConsumerHeartbeatResult) {
	cl.epoch = res.MemberEpoch
	if !res.HasAssignment {
		return
	}
	next := fromList(res.Assignment)
	for tp := range cl.owned {
		if !next[tp] {
			if cl.revoking == nil {
				cl.revoking = tpSet{}
			}
			cl.revoking[tp] = true
		}
	}
	cl.owned = next
	if !cl.slow {
		cl.revoking = nil
	}
}

func (s *csim) beat(cl *simClient, prompt bool) {
	if prompt || s.rng.IntN(2) == 0 {
		cl.revoking = nil // done revoking
	}
	req := ConsumerHeartbeatRequest{Group: "g", MemberID: cl.id, MemberEpoch: cl.epoch, RebalanceTimeout: -1, InstanceID: cl.inst}
	if len(cl.revoking) == 0 {
		req.Owned = toList(cl.owned) // a client reports what it owns once it revoked
	}
	res, out := s.c.ConsumerHeartbeat(s.now, req)
	s.removed(out)
	cl.lastBeat = s.now
	if res.Err != nil {
		// Fenced or unknown: the client drops everything and rejoins.
		delete(s.clients, cl.id)
		return
	}
	s.answer(cl, res)
}

// removed forgets clients the coordinator fenced: they are told at their
// next heartbeat or commit, and until then hold nothing the group honours.
func (s *csim) removed(out Output) {
	if s.shadow != nil {
		for _, ev := range out.Events {
			replayOne(s.t, s.shadow, ev)
		}
	}
	for _, r := range out.Removed {
		delete(s.clients, r.MemberID)
	}
}

func (s *csim) step() {
	ids := sortedKeys(s.clients)
	pick := func() *simClient { return s.clients[ids[s.rng.IntN(len(ids))]] }
	switch r := s.rng.IntN(100); {
	case r < 12 || len(ids) == 0:
		s.join(nil)
	case r < 15:
		s.join(ptr(fmt.Sprintf("pod%d", s.rng.IntN(3))))
	case r < 20:
		cl := pick()
		epoch := LeaveEpoch
		if cl.inst != nil && s.rng.IntN(2) == 0 {
			epoch = StaticLeaveEpoch
		}
		res, out := s.c.ConsumerHeartbeat(s.now, ConsumerHeartbeatRequest{Group: "g", MemberID: cl.id, MemberEpoch: epoch, InstanceID: cl.inst})
		s.removed(out)
		if res.Err != nil {
			s.t.Fatalf("leave %s: %v", cl.id, res.Err)
		}
		delete(s.clients, cl.id)
	case r < 23:
		delete(s.clients, pick().id) // crash: the session will expire
	case r < 26:
		t := []string{"a", "b"}[s.rng.IntN(2)]
		s.counts[t] = min(s.counts[t]+int32(1+s.rng.IntN(3)), 20)
		s.removed(s.c.SetPartitions(s.now, t, s.counts[t]))
	case r < 40:
		s.now = s.now.Add(time.Duration(1+s.rng.IntN(3)) * time.Second)
		for _, cl := range s.clients { // live clients heartbeat in time
			if s.now.Sub(cl.lastBeat) >= simSession/2 {
				s.beat(cl, false)
			}
		}
		s.removed(s.c.Tick(s.now))
	default:
		s.beat(pick(), false)
	}
}

// check: live clients never hold a partition at the same time.
func (s *csim) check(step int) {
	holder := map[topicPartition]string{}
	for _, id := range sortedKeys(s.clients) {
		for tp := range s.clients[id].held() {
			if o, ok := holder[tp]; ok {
				s.t.Fatalf("step %d: %s/%d held by %s and %s", step, tp.topic, tp.partition, o, id)
			}
			holder[tp] = id
		}
	}
}

// converge answers promptly until nothing moves, then checks the target
// was reached: every partition of a subscribed topic held exactly once.
func (s *csim) converge() {
	for range 8 { // crashed members' sessions run out; live ones beat
		s.now = s.now.Add(3 * time.Second)
		for _, id := range sortedKeys(s.clients) {
			if cl := s.clients[id]; cl != nil {
				s.beat(cl, true)
			}
		}
		s.removed(s.c.Tick(s.now))
		s.check(-1)
	}
	for range 20 {
		for _, id := range sortedKeys(s.clients) {
			if cl := s.clients[id]; cl != nil {
				s.beat(cl, true)
			}
		}
	}
	s.check(-1)
	if len(s.clients) == 0 {
		return
	}
	held, want := 0, 0
	subscribed := map[string]bool{}
	for _, cl := range s.clients {
		held += len(cl.owned)
		for _, t := range cl.topics {
			subscribed[t] = true
		}
	}
	cg := s.c.groups["g"].cg
	for _, m := range cg.members {
		if m.epoch == StaticLeaveEpoch { // away: its partitions wait for it
			held += len(m.assigned)
			for _, t := range m.topics {
				subscribed[t] = true
			}
		}
	}
	for t := range subscribed {
		want += int(s.counts[t])
	}
	if held != want {
		s.t.Fatalf("converged holding %d partitions, the subscribed topics have %d", held, want)
	}
	if st := cg.state(); st != Stable {
		s.t.Fatalf("converged in state %v", st)
	}
}

func TestConsumerGroupModel(t *testing.T) {
	for _, assignor := range []string{AssignorUniform, AssignorRange} {
		for seed := range uint64(40) {
			t.Run(fmt.Sprintf("%s/%d", assignor, seed), func(t *testing.T) {
				s := newCsim(t, seed, assignor)
				for i := range 300 {
					s.step()
					s.check(i)
				}
				s.converge()
			})
		}
	}
}

// TestAssignorsProperties: over random memberships and topics, both
// assignors give every partition of a subscribed topic to exactly one of
// its subscribers; uniform balances members of one subscription within one
// partition and, fed its previous answer, moves nothing when nothing
// changed; range matches the reference (contiguous ranges in member order).
func TestAssignorsProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		counts := map[string]int32{"a": int32(rng.IntN(9)), "b": int32(1 + rng.IntN(9)), "c": int32(1 + rng.IntN(4))}
		homogeneous := rng.IntN(2) == 0
		var ms []assignee
		for j := range 1 + rng.IntN(6) {
			topics := []string{"a", "b"}
			if !homogeneous && rng.IntN(2) == 0 {
				topics = []string{"b", "c"}
			}
			ms = append(ms, assignee{id: fmt.Sprintf("m%d", j), topics: topics})
		}
		for _, name := range []string{AssignorUniform, AssignorRange} {
			var got map[string]tpSet
			if name == AssignorUniform {
				got = assignUniform(ms, counts)
			} else {
				got = assignRangeServer(ms, counts)
			}
			owner := map[topicPartition]string{}
			for id, ps := range got {
				for tp := range ps {
					if o, dup := owner[tp]; dup {
						t.Fatalf("case %d %s: %v to %s and %s", i, name, tp, o, id)
					}
					owner[tp] = id
				}
			}
			for _, m := range ms {
				for _, topic := range m.topics {
					for p := range counts[topic] {
						o, ok := owner[topicPartition{topic, p}]
						if !ok {
							t.Fatalf("case %d %s: %s/%d unassigned", i, name, topic, p)
						}
						if !slices.Contains(memberTopics(ms, o), topic) {
							t.Fatalf("case %d %s: %s/%d to %s, not a subscriber", i, name, topic, p, o)
						}
					}
				}
			}
			if name == AssignorRange && !maps.EqualFunc(got, referenceRange(ms, counts), func(a, b tpSet) bool { return maps.Equal(a, b) }) {
				t.Fatalf("case %d: range differs from the reference", i)
			}
			if name == AssignorUniform && homogeneous {
				lo, hi := 1<<30, 0
				for _, ps := range got {
					lo, hi = min(lo, len(ps)), max(hi, len(ps))
				}
				if hi-lo > 1 {
					t.Fatalf("case %d: uniform sizes from %d to %d", i, lo, hi)
				}
				again := slices.Clone(ms)
				for k := range again {
					again[k].prev = got[again[k].id]
				}
				if next := assignUniform(again, counts); !maps.EqualFunc(next, got, func(a, b tpSet) bool { return maps.Equal(a, b) }) {
					t.Fatalf("case %d: uniform moved partitions with nothing changed", i)
				}
			}
		}
	}
}

func memberTopics(ms []assignee, id string) []string {
	for _, m := range ms {
		if m.id == id {
			return m.topics
		}
	}
	return nil
}

// referenceRange is Kafka's range written out the obvious way: for each
// topic, subscriber k of n gets partitions [k*p/n + min(k, p%n), ...).
func referenceRange(ms []assignee, counts map[string]int32) map[string]tpSet {
	out := map[string]tpSet{}
	for _, m := range ms {
		out[m.id] = tpSet{}
	}
	for _, topic := range []string{"a", "b", "c"} {
		var subs []string
		for _, m := range ms {
			if slices.Contains(m.topics, topic) {
				subs = append(subs, m.id)
			}
		}
		n, p := len(subs), int(counts[topic])
		for k, id := range subs {
			start := k*(p/n) + min(k, p%n)
			size := p / n
			if k < p%n {
				size++
			}
			for q := start; q < start+size; q++ {
				out[id][topicPartition{topic, int32(q)}] = true
			}
		}
	}
	return out
}
