package engine

import (
	"errors"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/raftstore"
	"github.com/sluice-mq/sluice/internal/vfs"
	"go.etcd.io/raft/v3/raftpb"
)

func open(t *testing.T, fsys vfs.FS, node multiraft.NodeID, member bool) (*Engine, error) {
	t.Helper()
	e, err := Open(Options{Node: node, Member: member, Store: raftstore.Options{FS: fsys, Dir: "raft"}})
	if err == nil {
		t.Cleanup(func() { _ = e.Close() })
	}
	return e, err
}

// TestIdentity: a new node's directory gets an identity that later opens must match; a
// member's empty directory (a wiped or replaced disk) and another node's directory are
// refused.
func TestIdentity(t *testing.T) {
	mem := vfs.NewMem()
	first, err := open(t, mem, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Fresh() || first.Incarnation() == 0 {
		t.Fatalf("new directory: fresh %v, incarnation %d", first.Fresh(), first.Incarnation())
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	mem.Crash() // the identity is durable once Open returns

	for _, tc := range []struct {
		name   string
		fsys   vfs.FS
		node   multiraft.NodeID
		member bool
		want   error
	}{
		{"the same node restarts", mem, 1, true, nil},
		{"the same node, not told it is a member", mem, 1, false, nil},
		{"another node's directory", mem, 2, true, ErrWrongNode},
		{"a member on an empty disk", vfs.NewMem(), 1, true, ErrStateLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := open(t, tc.fsys, tc.node, tc.member)
			if !errors.Is(err, tc.want) {
				t.Fatalf("open: %v, want %v", err, tc.want)
			}
			if err != nil {
				return
			}
			if e.Fresh() || e.Incarnation() != first.Incarnation() {
				t.Fatalf("reopen: fresh %v, incarnation %d, want %d", e.Fresh(), e.Incarnation(), first.Incarnation())
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestStateWithoutIdentityIsRefused: Raft state whose identity file is gone is not taken
// for a new node's directory.
func TestStateWithoutIdentityIsRefused(t *testing.T) {
	mem := vfs.NewMem()
	e, err := open(t, mem, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Group(7); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := mem.Remove("raft/" + identityFile); err != nil {
		t.Fatal(err)
	}
	if _, err := open(t, mem, 1, false); !errors.Is(err, ErrStateLost) {
		t.Fatalf("open without identity: %v", err)
	}
}

func TestDamagedIdentityIsRefused(t *testing.T) {
	mem := vfs.NewMem()
	if err := vfs.MkdirAllDurable(mem, "raft"); err != nil {
		t.Fatal(err)
	}
	b := identity{node: 1, incarnation: 9}.encode()
	b[6] ^= 1
	if err := vfs.WriteFileAtomic(mem, "raft", identityFile, b); err != nil {
		t.Fatal(err)
	}
	if _, err := open(t, mem, 1, true); err == nil {
		t.Fatal("a damaged identity was accepted")
	}
}

// TestSyncRefusesForeignStorage: a Storage from another engine is never counted as synced.
func TestSyncRefusesForeignStorage(t *testing.T) {
	e, err := open(t, vfs.NewMem(), 1, false)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := multiraft.NewMemEngine().Group(1)
	if err := e.Sync([]multiraft.Storage{other}); err == nil {
		t.Fatal("Sync of a MemEngine group succeeded")
	}
}

// TestWritesSurviveAPowerCutOnlyOnceSynced: through the adapter, what Sync covered is
// there after a power cut and what it did not cover is not.
func TestWritesSurviveAPowerCutOnlyOnceSynced(t *testing.T) {
	mem := vfs.NewMem()
	e, err := open(t, mem, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.Group(3)
	if err != nil {
		t.Fatal(err)
	}
	ents := []raftpb.Entry{{Index: 1, Term: 1, Data: []byte("a")}, {Index: 2, Term: 1, Data: []byte("b")}}
	if err := st.Append(ents[:1]); err != nil {
		t.Fatal(err)
	}
	if err := st.SetHardState(raftpb.HardState{Term: 1, Vote: 1, Commit: 1}); err != nil {
		t.Fatal(err)
	}
	if err := e.Sync([]multiraft.Storage{st}); err != nil {
		t.Fatal(err)
	}
	if err := st.Append(ents[1:]); err != nil {
		t.Fatal(err)
	}
	mem.Crash()
	_ = e.Close()
	e2, err := open(t, mem, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	st2, err := e2.Group(3)
	if err != nil {
		t.Fatal(err)
	}
	last, _ := st2.LastIndex()
	hs, _, _ := st2.InitialState()
	if last != 1 || hs.Term != 1 || hs.Vote != 1 || hs.Commit != 1 {
		t.Fatalf("after the cut: last %d, hard state %+v; want 1 and {1 1 1}", last, hs)
	}
	if err := e2.RemoveGroup(3); err != nil {
		t.Fatal(err)
	}
	ids, _ := e2.Store().GroupIDs()
	if len(ids) != 0 {
		t.Fatalf("groups after RemoveGroup: %v", ids)
	}
}
