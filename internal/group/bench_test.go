package group

import (
	"fmt"
	"testing"
	"time"
)

// benchGroup forms a Stable group of n members over one topic of p
// partitions and returns the member ids.
func benchGroup(b *testing.B, c *Coordinator, mode AssignMode, n int, p int32) []string {
	c.SetPartitions(epoch, "t", p)
	var ids []string
	for i := range n {
		_, out := c.Join(epoch, benchReq("", mode, i))
		for _, r := range out.Joins {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
		ids = append(ids, fmt.Sprintf("m-%d", i+1))
	}
	rebalance(b, c, mode, ids, 0)
	return ids
}

func benchReq(id string, mode AssignMode, variant int) JoinRequest {
	name := AssignorRange
	return JoinRequest{Group: "g", MemberID: id, ClientID: "m", Mode: mode, ProtocolType: "consumer",
		Protocols: []Protocol{{Name: name, Metadata: []byte{byte(variant)}}}, Topics: []string{"t"},
		SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second}
}

// rebalance makes every member rejoin (the first with changed metadata,
// which is what starts a rebalance) and, for LeaderAssigns, runs the
// leader's and followers' syncs, until the group is Stable again.
func rebalance(b *testing.B, c *Coordinator, mode AssignMode, ids []string, round int) {
	var gen int32
	var leader string
	for i, id := range ids {
		_, out := c.Join(epoch, benchReq(id, mode, round+i))
		for _, r := range out.Joins {
			gen, leader = r.Generation, r.Leader
		}
	}
	if mode == LeaderAssigns {
		assign := make(map[string][]byte, len(ids))
		for _, id := range ids {
			assign[id] = []byte("partitions")
		}
		for _, id := range ids {
			if id != leader {
				c.Sync(epoch, SyncRequest{Group: "g", MemberID: id, Generation: gen})
			}
		}
		c.Sync(epoch, SyncRequest{Group: "g", MemberID: leader, Generation: gen, Assignments: assign})
	}
	if info, _ := c.Describe("g"); info.State != Stable || info.Generation != gen {
		b.Fatalf("not stable after rebalance: %s gen %d", info.State, info.Generation)
	}
}

// BenchmarkRebalance10x100 measures one full rebalance of 10 members over
// 100 partitions: all joins, assignment, and (LeaderAssigns) syncs.
func BenchmarkRebalance10x100(b *testing.B) {
	for _, mode := range []AssignMode{BrokerAssigns, LeaderAssigns} {
		b.Run(map[AssignMode]string{BrokerAssigns: "broker-assigns", LeaderAssigns: "leader-assigns"}[mode], func(b *testing.B) {
			c := New(Config{})
			ids := benchGroup(b, c, mode, 10, 100)
			round := 1
			for b.Loop() {
				rebalance(b, c, mode, ids, round*16)
				round++
			}
		})
	}
}

// BenchmarkConsumerRecordBytes measures what durable membership writes
// for a KIP-848 group: one op is one member joining a group of n over
// one topic of 200 partitions, then every member heartbeating promptly
// until the group is Stable again. Reported: the records' bytes and count
// per op (what a cluster's metadata log grows by).
func BenchmarkConsumerRecordBytes(b *testing.B) {
	for _, n := range []int{10, 50} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			var bytes, records int
			for b.Loop() {
				c := New(Config{DurableMembership: true})
				c.SetPartitions(epoch, "t", 200)
				clients := map[string]*cclient{}
				var evs []Event
				for i := range n {
					id := fmt.Sprintf("member-%04d", i)
					res, out := c.ConsumerHeartbeat(epoch, joinReq(id, "t"))
					evs = append(evs[:0], out.Events...)
					clients[id] = &cclient{id: id, epoch: res.MemberEpoch, owned: fromList(res.Assignment)}
					for moved := true; moved; {
						moved = false
						for _, id := range sortedKeys(clients) {
							cl := clients[id]
							res, out := c.ConsumerHeartbeat(epoch, ConsumerHeartbeatRequest{Group: "g", MemberID: id,
								MemberEpoch: cl.epoch, RebalanceTimeout: -1, Owned: toList(cl.owned)})
							if res.Err != nil {
								b.Fatal(res.Err)
							}
							evs = append(evs, out.Events...)
							if res.HasAssignment || res.MemberEpoch != cl.epoch {
								moved = moved || !sameKeys(cl.owned, fromList(res.Assignment)) || res.MemberEpoch != cl.epoch
								cl.epoch, cl.owned = res.MemberEpoch, fromList(res.Assignment)
							}
						}
					}
					if i == n-1 {
						for _, ev := range evs {
							if ev.Type == EventConsumerMembers {
								raw, _ := ev.MarshalBinary()
								bytes += len(raw)
								records++
							}
						}
					}
				}
			}
			b.ReportMetric(float64(bytes)/float64(b.N), "record-B/join")
			b.ReportMetric(float64(records)/float64(b.N), "records/join")
		})
	}
}

// BenchmarkSnapshot: a snapshot of 2,000 groups of 100 committed offsets each (a metadata
// snapshot's group state of ~3 MB): captured (what a Ready loop pays, snapshot.go), then
// built (the events, off the loop), and both at once (Snapshot).
//
//	go test -run '^$' -bench 'Snapshot$' ./internal/group/
func BenchmarkSnapshot(b *testing.B) {
	c := New(Config{DurableMembership: true})
	for g := range 2000 {
		at := epoch.Add(time.Duration(g) * time.Millisecond)
		ev := Event{Type: EventOffsetsCommitted, Group: fmt.Sprintf("group-%d", g), Time: at}
		for p := range 100 {
			ev.Offsets = append(ev.Offsets, CommittedOffset{Topic: fmt.Sprintf("topic-%d", g%50), Partition: int32(p),
				Committed: Committed{Offset: int64(p * 1000), CommitTime: at}})
		}
		if err := c.Apply(ev); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("capture", func(b *testing.B) {
		for b.Loop() {
			c.CaptureSnapshot()
		}
	})
	b.Run("build", func(b *testing.B) {
		build := c.CaptureSnapshot()
		for b.Loop() {
			build()
		}
	})
	b.Run("snapshot", func(b *testing.B) {
		for b.Loop() {
			c.Snapshot()
		}
	})
	// What copy on write costs a commit: the first commit to a group after a capture
	// clones its offsets map (100 entries here); the others write in place.
	commit := func(b *testing.B, g int) {
		at := epoch.Add(time.Hour)
		ev := Event{Type: EventOffsetsCommitted, Group: fmt.Sprintf("group-%d", g%2000), Time: at,
			Offsets: []CommittedOffset{{Topic: fmt.Sprintf("topic-%d", g%50), Partition: 7, Committed: Committed{Offset: int64(g), CommitTime: at}}}}
		if err := c.Apply(ev); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("commit", func(b *testing.B) {
		g := 0
		for b.Loop() {
			commit(b, g)
			g++
		}
	})
	b.Run("commit-first-after-capture", func(b *testing.B) {
		g := 0
		for b.Loop() {
			b.StopTimer()
			c.CaptureSnapshot()
			b.StartTimer()
			commit(b, g)
			g++
		}
	})
}
