package group

import (
	"bytes"
	"fmt"
	"maps"
	"testing"
)

// newDurableCsim is the consumer-group simulation with DurableMembership:
// every event is replayed into a shadow coordinator as it is returned (the
// broker answers a heartbeat only once its events are durable).
func newDurableCsim(t *testing.T, seed uint64, assignor string) *csim {
	s := newCsim(t, seed, assignor)
	s.c = New(Config{DurableMembership: true, Incarnation: "0", Consumer: s.c.cfg.Consumer})
	s.shadow = New(Config{DurableMembership: true, Consumer: s.c.cfg.Consumer})
	for _, topic := range []string{"a", "b"} {
		s.removed(s.c.SetPartitions(s.now, topic, s.counts[topic]))
	}
	return s
}

// failover replaces the coordinator with one rebuilt from the shadow's
// Snapshot (the journal compacted, as the broker's snapshot does) and
// checks it holds the live one's consumer group exactly (unless the live
// one holds changes that were lost).
func (s *csim) failover(n int, lost bool) {
	s.t.Helper()
	c := New(Config{DurableMembership: true, Incarnation: fmt.Sprint(n), Consumer: s.c.cfg.Consumer})
	for _, ev := range s.shadow.Snapshot() {
		replayOne(s.t, c, ev)
	}
	for topic, count := range s.counts {
		c.KnowPartitions(topic, count)
	}
	s.removed(c.Resume(s.now))
	if g := s.c.groups["g"]; g != nil && g.cg != nil && !lost {
		r := c.groups["g"]
		if r == nil || r.cg == nil {
			if len(g.cg.members) > 0 {
				s.t.Fatalf("failover %d: the live group has %d members, the replayed one none", n, len(g.cg.members))
			}
		} else if len(g.cg.members) == 0 {
			// An emptied group's epochs are not in a snapshot (nobody can
			// name them): it comes back at epoch 0, as new.
			if len(r.cg.members) > 0 {
				s.t.Fatalf("failover %d: the live group is empty, the replayed one has %d members", n, len(r.cg.members))
			}
		} else if live, got := consumerState(g.cg), consumerState(r.cg); !sameRecorded(live, got) {
			s.t.Fatalf("failover %d: the replayed consumer group differs:\n live %+v\n got  %+v", n, g.describeConsumer(), r.describeConsumer())
		}
	}
	s.c = c
}

// lostBeat is a heartbeat whose record never became durable: the
// coordinator fails over before the answer, which the client never sees.
// It retries from what it had, against the replayed coordinator.
func (s *csim) lostBeat(cl *simClient, n int) {
	req := ConsumerHeartbeatRequest{Group: "g", MemberID: cl.id, MemberEpoch: cl.epoch, RebalanceTimeout: -1, InstanceID: cl.inst}
	if len(cl.revoking) == 0 {
		req.Owned = toList(cl.owned)
	}
	s.c.ConsumerHeartbeat(s.now, req) // its events and answer are lost
	s.failover(n, true)
}

// TestConsumerGroupModelWithFailovers: the consumer-group model test with
// the coordinator failing over to one replayed from its records, now and
// then losing the last heartbeat's record and answer. The replayed group
// equals the live one, live clients never hold a partition at once across
// the failovers, and the group still converges.
func TestConsumerGroupModelWithFailovers(t *testing.T) {
	for _, assignor := range []string{AssignorUniform, AssignorRange} {
		for seed := range uint64(envSeeds(30)) {
			t.Run(fmt.Sprintf("%s/%d", assignor, seed), func(t *testing.T) {
				s := newDurableCsim(t, seed, assignor)
				failovers := 0
				for i := range 300 {
					s.step()
					s.check(i)
					switch r := s.rng.IntN(25); {
					case r == 0:
						failovers++
						s.failover(failovers, false)
					case r == 1 && len(s.clients) > 0:
						ids := sortedKeys(s.clients)
						failovers++
						s.lostBeat(s.clients[ids[s.rng.IntN(len(ids))]], failovers)
					}
					s.check(i)
				}
				s.converge()
				if failovers == 0 {
					t.Fatal("no failover drawn")
				}
			})
		}
	}
}

func sameRecorded(a, b consumerRecorded) bool {
	return bytes.Equal(a.header, b.header) && maps.EqualFunc(a.members, b.members, bytes.Equal)
}
