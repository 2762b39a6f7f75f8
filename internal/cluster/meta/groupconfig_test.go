package meta

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

func groupConfigCommands() []Command {
	return []Command{
		{Op: OpSetGroupConfig, Name: "workers", Settings: []byte(`{"lock_duration":1000000000}`)},
		{Op: OpSetGroupConfig, Name: "audit", Settings: []byte(`{"delivery_limit":3}`)},
		{Op: OpSetGroupConfig, Name: "", Settings: []byte(`{}`)}, // refused
		{Op: OpSetGroupConfig, Name: "workers", Settings: []byte(`{"lock_duration":2000000000}`)},
		{Op: OpSetGroupConfig, Name: "audit"}, // removed
		{Op: OpSetGroupConfig, Name: "gone"},  // removing nothing
	}
}

// TestGroupConfigsApplyAndSnapshot: group configs are set, replaced and removed by apply;
// a snapshot at every point restores to the same state (version 5 while no group has a
// config, so older builds still read it; 7 once one has) and the rest applies on top.
func TestGroupConfigsApplyAndSnapshot(t *testing.T) {
	cmds := append(seedCommands(), groupConfigCommands()...)
	want := checkSnapshotCuts(t, cmds, len(seedCommands()), func(s *State) byte {
		if len(s.GroupConfigs) > 0 {
			return snapVersionConfigs
		}
		return snapVersionMembers
	})
	if len(want.GroupConfigs) != 1 || !bytes.Equal(want.GroupConfigs["workers"], []byte(`{"lock_duration":2000000000}`)) {
		t.Fatalf("group configs after the history: %q", want.GroupConfigs)
	}
	// The pending twin: 8.
	pending := NewMachine(1)
	applyAll(t, pending, 1, append(cmds, Command{Op: OpGroupOffsets, Payload: []byte("offsets")}))
	if snap, err := pending.Snapshot(); err != nil || snap[0] != snapVersionConfigsPending {
		t.Fatalf("snapshot with pending offsets and group configs: version %d, %v", snap[0], err)
	}
}

// TestSetGroupConfigThroughFollower: a follower's SetGroupConfig is forwarded to the
// leader, and every node applies it; an empty config removes it.
func TestSetGroupConfigThroughFollower(t *testing.T) {
	c := newCluster(t, 3)
	l := c.elect()
	follower := c.ids[0]
	if follower == l {
		follower = c.ids[1]
	}
	set := func(v []byte) {
		t.Helper()
		if err := c.call(func(ctx context.Context) error { return c.nodes[follower].cat.SetGroupConfig(ctx, "g", v) }); err != nil {
			t.Fatal(err)
		}
	}
	set([]byte(`{"delivery_limit":3}`))
	for _, id := range []multiraft.NodeID{follower, l} {
		if got := c.nodes[id].sm.State().GroupConfigs["g"]; string(got) != `{"delivery_limit":3}` {
			t.Fatalf("n%d's state after the follower's SetGroupConfig: %q", id, got)
		}
	}
	set(nil)
	if got, ok := c.nodes[follower].sm.State().GroupConfigs["g"]; ok {
		t.Fatalf("removed, still there: %q", got)
	}
	err := c.call(func(ctx context.Context) error { return c.nodes[follower].cat.SetGroupConfig(ctx, "", []byte("x")) })
	if !errors.Is(err, ErrInvalidGroupName) {
		t.Fatalf("an empty group id: %v", err)
	}
}
