package memnet

import (
	"fmt"
	"slices"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

type sink struct{ got []string }

func (s *sink) Receive(b multiraft.Batch) {
	s.got = append(s.got, fmt.Sprintf("%d>%d:%d", b.From, b.To, len(b.Messages)))
}

// run sends count batches n1→n2 (batch i carries i messages), one per tick, then ticks
// until everything due arrived, and returns what n2 received.
func run(n *Network, count int) []string {
	s := &sink{}
	n.Attach(2, s)
	n.Attach(1, &sink{})
	tr := n.Transport(1)
	for i := range count {
		tr.Send(multiraft.Batch{To: 2, Messages: make([]multiraft.Message, i)})
		n.Advance()
		n.Deliver()
	}
	for range 20 {
		n.Advance()
		n.Deliver()
	}
	return s.got
}

func TestFaults(t *testing.T) {
	for _, tc := range []struct {
		name  string
		f     Faults
		check func(t *testing.T, got []string, st Stats)
	}{
		{"clean", Faults{}, func(t *testing.T, got []string, st Stats) {
			if len(got) != 50 || st.Dropped+st.Duplicated != 0 {
				t.Fatalf("clean link: %d delivered, stats %+v", len(got), st)
			}
		}},
		{"cut", Faults{Cut: true}, func(t *testing.T, got []string, st Stats) {
			if len(got) != 0 || st.Dropped != 50 {
				t.Fatalf("cut link delivered %d, stats %+v", len(got), st)
			}
		}},
		{"drop", Faults{Drop: 0.5}, func(t *testing.T, got []string, st Stats) {
			if len(got) < 10 || len(got) > 40 || int(st.Dropped) != 50-len(got) {
				t.Fatalf("drop 0.5: %d of 50 delivered, stats %+v", len(got), st)
			}
		}},
		{"duplicate", Faults{Duplicate: 0.5}, func(t *testing.T, got []string, st Stats) {
			if len(got) != 50+int(st.Duplicated) || st.Duplicated < 10 {
				t.Fatalf("duplicate 0.5: %d delivered, stats %+v", len(got), st)
			}
		}},
		{"reorder", Faults{MaxDelay: 5}, func(t *testing.T, got []string, st Stats) {
			if len(got) != 50 || slices.IsSortedFunc(got, func(a, b string) int { return len(a) - len(b) }) && slices.IsSorted(got) {
				t.Fatalf("delays 0..5 kept everything in order: %v", got)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := New(7)
			n.SetLink(1, 2, tc.f)
			got := run(n, 50)
			tc.check(t, got, n.Stats())
			// the same seed, the same schedule
			again := New(7)
			again.SetLink(1, 2, tc.f)
			if g2 := run(again, 50); !slices.Equal(got, g2) {
				t.Fatalf("seed 7 gave two schedules:\n%v\n%v", got, g2)
			}
		})
	}
}

func TestPartitionAndHeal(t *testing.T) {
	n := New(1)
	s := map[multiraft.NodeID]*sink{1: {}, 2: {}, 3: {}}
	for id, r := range s {
		n.Attach(id, r)
	}
	n.Partition([]multiraft.NodeID{1}, []multiraft.NodeID{2, 3})
	send := func() {
		for from := multiraft.NodeID(1); from <= 3; from++ {
			for to := multiraft.NodeID(1); to <= 3; to++ {
				if from != to {
					n.Transport(from).Send(multiraft.Batch{To: to})
				}
			}
		}
		n.Deliver()
	}
	send()
	if len(s[1].got) != 0 || len(s[2].got) != 1 || len(s[3].got) != 1 {
		t.Fatalf("partitioned {1} | {2,3}: n1 %v n2 %v n3 %v", s[1].got, s[2].got, s[3].got)
	}
	n.Heal()
	send()
	if len(s[1].got) != 2 {
		t.Fatalf("after heal n1 got %v", s[1].got)
	}
	// a one-way cut: 1 hears 2, 2 does not hear 1
	n.SetLink(1, 2, Faults{Cut: true})
	send()
	if len(s[1].got) != 4 || len(s[2].got) != 4 {
		t.Fatalf("one-way cut 1→2: n1 %v, n2 %v", s[1].got, s[2].got)
	}
	n.Detach(3)
	n.Transport(1).Send(multiraft.Batch{To: 3})
	n.Deliver()
	if len(s[3].got) != 5 {
		t.Fatalf("a detached node received: %v", s[3].got)
	}
}

// TestPartitionHoldsForLateNodes: a node attached after the partition (a restart) is on
// the side the partition named, not connected to everyone.
func TestPartitionHoldsForLateNodes(t *testing.T) {
	n := New(1)
	a, b := &sink{}, &sink{}
	n.Attach(1, a)
	n.Partition([]multiraft.NodeID{1}, []multiraft.NodeID{2})
	n.Attach(2, b) // n2 restarts after the partition began
	n.Transport(1).Send(multiraft.Batch{To: 2})
	n.Transport(2).Send(multiraft.Batch{To: 1})
	n.Deliver()
	if len(a.got)+len(b.got) != 0 {
		t.Fatalf("across the partition: n1 got %v, n2 got %v", a.got, b.got)
	}
}
