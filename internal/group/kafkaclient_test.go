package group

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaMember plays a Kafka consumer whose leader-side assignment is done
// by franz-go's own balancers, so the relay of opaque metadata and
// assignments is checked against a real client's encoding.
type kafkaMember struct {
	name      string
	id        string
	gen       int32
	balancers []kgo.GroupBalancer
	owned     map[string][]int32
}

func (k *kafkaMember) request() JoinRequest {
	req := JoinRequest{Group: "kg", MemberID: k.id, ClientID: k.name, ProtocolType: "consumer",
		Topics: []string{"orders"}, SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second}
	for _, b := range k.balancers {
		req.Protocols = append(req.Protocols, Protocol{Name: b.ProtocolName(),
			Metadata: b.JoinGroupMetadata([]string{"orders"}, k.owned, k.gen)})
	}
	return req
}

// kafkaRound makes every member join (as franz-go would after a
// rebalance), lets the leader balance with franz-go, syncs everyone, and
// returns the protocol chosen.
func kafkaRound(t *testing.T, c *Coordinator, now time.Time, ms []*kafkaMember) string {
	results := map[Ticket]*kafkaMember{}
	var done []JoinResult
	for _, m := range ms {
		tk, out := c.Join(now, m.request())
		results[tk] = m
		done = append(done, out.Joins...)
	}
	var leader JoinResult
	for _, r := range done {
		if r.Err != nil {
			t.Fatalf("join: %v", r.Err)
		}
		m := results[r.Ticket]
		m.id, m.gen = r.MemberID, r.Generation
		if r.Leader == r.MemberID {
			leader = r
		}
	}
	if len(done) != len(ms) || leader.MemberID == "" {
		t.Fatalf("join round incomplete: %d answers for %d members", len(done), len(ms))
	}
	var balancer kgo.GroupBalancer
	for _, b := range ms[0].balancers {
		if b.ProtocolName() == leader.Protocol {
			balancer = b
		}
	}
	var members []kmsg.JoinGroupResponseMember
	for _, gm := range leader.Members {
		members = append(members, kmsg.JoinGroupResponseMember{MemberID: gm.MemberID, ProtocolMetadata: gm.Metadata})
	}
	mb, _, err := balancer.MemberBalancer(members)
	if err != nil {
		t.Fatalf("franz-go cannot read the relayed metadata: %v", err)
	}
	plan, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(map[string]int32{"orders": 6})
	if err != nil {
		t.Fatalf("franz-go balance: %v", err)
	}
	assign := map[string][]byte{}
	for _, a := range plan.IntoSyncAssignment() {
		assign[a.MemberID] = a.MemberAssignment
	}
	for _, m := range ms {
		req := SyncRequest{Group: "kg", MemberID: m.id, Generation: m.gen, ProtocolType: "consumer", Protocol: leader.Protocol}
		if m.id == leader.MemberID {
			req.Assignments = assign
		}
		c.Sync(now, req)
	}
	for _, m := range ms { // Stable now: every Sync answers at once
		_, out := c.Sync(now, SyncRequest{Group: "kg", MemberID: m.id, Generation: m.gen})
		if out.Syncs[0].Err != nil {
			t.Fatalf("sync: %v", out.Syncs[0].Err)
		}
		if m.owned, err = balancer.ParseSyncAssignment(out.Syncs[0].Assignment); err != nil {
			t.Fatalf("franz-go cannot read the relayed assignment: %v", err)
		}
	}
	return leader.Protocol
}

func checkCoverage(t *testing.T, ms []*kafkaMember, partitions int) {
	owner := map[int32]string{}
	for _, m := range ms {
		for _, p := range m.owned["orders"] {
			if o, dup := owner[p]; dup {
				t.Fatalf("partition %d owned by %s and %s", p, o, m.name)
			}
			owner[p] = m.name
		}
	}
	if len(owner) != partitions {
		t.Fatalf("%d of %d partitions owned: %v", len(owner), partitions, owner)
	}
}

// TestKafkaClientGroupFlow: three franz-go-style consumers over six
// partitions, the sticky protocol chosen by vote, then one leaves and the
// other two take its partitions over.
func TestKafkaClientGroupFlow(t *testing.T) {
	c := New(Config{})
	sticky := []kgo.GroupBalancer{kgo.StickyBalancer(), kgo.RangeBalancer()}
	ms := []*kafkaMember{
		{name: "a", balancers: sticky},
		{name: "b", balancers: sticky},
		{name: "c", balancers: []kgo.GroupBalancer{kgo.RangeBalancer(), kgo.StickyBalancer()}},
	}
	// The first member alone forms generation 1. The others' first joins
	// start a rebalance; the first learns of it and rejoins, completing
	// generation 2 (joining in another order would complete a one-member
	// generation at once, exactly as Kafka does).
	now := epoch
	if p := kafkaRound(t, c, now, ms[:1]); p != "sticky" {
		t.Fatalf("protocol %q", p)
	}
	if p := kafkaRound(t, c, now, []*kafkaMember{ms[1], ms[2], ms[0]}); p != "sticky" {
		t.Fatalf("protocol %q, want sticky (two first-choice votes to one)", p)
	}
	checkCoverage(t, ms, 6)
	kept := ms[0].owned["orders"]
	// Describe shows each member's partitions, read from the leader's opaque assignment.
	info, _ := c.Describe("kg")
	for _, m := range ms {
		var shown []int32
		for _, im := range info.Members {
			if im.MemberID == m.id {
				for _, tp := range im.Partitions {
					if tp.Topic == "orders" {
						shown = append(shown, tp.Partitions...)
					}
				}
			}
		}
		slices.Sort(shown)
		owned := slices.Sorted(slices.Values(m.owned["orders"]))
		if !slices.Equal(shown, owned) {
			t.Errorf("Describe shows %s with partitions %v, it owns %v", m.name, shown, owned)
		}
	}

	if errs, _ := c.Leave(now, "kg", []MemberRef{{MemberID: ms[2].id}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if err := c.Heartbeat(now, HeartbeatRequest{Group: "kg", MemberID: ms[0].id, Generation: ms[0].gen}); err != ErrRebalanceInProgress {
		t.Fatalf("heartbeat after a leave: %v", err)
	}
	kafkaRound(t, c, now, ms[:2])
	checkCoverage(t, ms[:2], 6)
	for _, p := range kept {
		if !containsInt32(ms[0].owned["orders"], p) {
			t.Fatalf("sticky balancer moved partition %d away from a surviving member", p)
		}
	}
}

func containsInt32(xs []int32, x int32) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// FuzzShownPartitions: whatever bytes a Kafka group leader sends as a member's
// assignment, describing the group reads them without failing, and shows partitions
// only when they read as a ConsumerProtocolAssignment.
func FuzzShownPartitions(f *testing.F) {
	valid := kmsg.ConsumerMemberAssignment{Topics: []kmsg.ConsumerMemberAssignmentTopic{{Topic: "orders", Partitions: []int32{0, 2}}}}
	f.Add(valid.AppendTo(nil))
	f.Add([]byte{0, 0, 0, 0, 0, 1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		g := &group{protocolType: "consumer"}
		shown := g.shownPartitions(&member{assignment: b})
		var a kmsg.ConsumerMemberAssignment
		if a.ReadFrom(b) != nil && shown != nil {
			t.Fatalf("an assignment that does not read showed %v", shown)
		}
	})
}
