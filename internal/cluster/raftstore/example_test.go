package raftstore_test

import (
	"fmt"
	"io"
	"log"

	"github.com/sluice-mq/sluice/internal/cluster/raftstore"
	"github.com/sluice-mq/sluice/internal/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// A host's Ready round over its groups: persist every group's snapshot,
// entries and hard state, one Sync for all of them, and only then send the
// messages and apply the committed entries.
func Example() {
	store, err := raftstore.Open(raftstore.Options{FS: vfs.NewMem(), Dir: "raft"})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	var groups []*raftstore.Group
	var nodes []*raft.RawNode
	for id := uint64(1); id <= 3; id++ {
		g, err := store.Group(id)
		if err != nil {
			panic(err)
		}
		// A single-voter group, bootstrapped from a snapshot.
		if err := g.ApplySnapshot(pb.Snapshot{Metadata: pb.SnapshotMetadata{Index: 1, Term: 1,
			ConfState: pb.ConfState{Voters: []uint64{1}}}}); err != nil {
			panic(err)
		}
		rn, err := raft.NewRawNode(&raft.Config{ID: 1, ElectionTick: 10, HeartbeatTick: 1, Storage: g,
			Applied: 1, MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 64,
			Logger: &raft.DefaultLogger{Logger: log.New(io.Discard, "", 0)}})
		if err != nil {
			panic(err)
		}
		if err := rn.Campaign(); err != nil {
			panic(err)
		}
		groups, nodes = append(groups, g), append(nodes, rn)
	}
	applied := 0
	for round := 0; round < 3; round++ {
		var ready []*raftstore.Group
		readies := make([]*raft.Ready, len(nodes))
		for k, rn := range nodes {
			if round == 1 {
				_ = rn.Propose([]byte(fmt.Sprint("hello ", k)))
			}
			if !rn.HasReady() {
				continue
			}
			rd := rn.Ready()
			g := groups[k]
			if !raft.IsEmptySnap(rd.Snapshot) {
				if err := g.ApplySnapshot(rd.Snapshot); err != nil {
					panic(err)
				}
			}
			if err := g.Append(rd.Entries); err != nil {
				panic(err)
			}
			if !raft.IsEmptyHardState(rd.HardState) {
				if err := g.SetHardState(rd.HardState); err != nil {
					panic(err)
				}
			}
			readies[k] = &rd
			ready = append(ready, g)
		}
		if err := store.Sync(ready...); err != nil { // one round of fdatasyncs for every group
			panic(err)
		}
		for k, rn := range nodes {
			rd := readies[k]
			if rd == nil {
				continue
			}
			// Send rd.Messages here (a single voter has none), then apply:
			for _, e := range rd.CommittedEntries {
				if e.Type == pb.EntryNormal && len(e.Data) > 0 {
					applied++
				}
			}
			rn.Advance(*rd)
		}
	}
	fmt.Println("proposals applied:", applied)
	// Output: proposals applied: 3
}
