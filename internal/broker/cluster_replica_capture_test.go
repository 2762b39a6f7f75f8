package broker

import (
	"fmt"
	"testing"
)

// TestClusterEveryNodeLosesPower: the partition's snapshots are made durable off the
// Ready loop (replicaLog.CaptureCheckpoint; the local log, written without fsync, is
// synced by the snapshot's encoding), and the Raft log is compacted behind them. Then
// every node loses power at once: no peer holds what a node's own disk lost, so each
// restart stands on its own checkpoint. Every record acknowledged before is on every
// replica afterwards, at the same offsets, byte for byte; with the sync left out, the
// records below the compacted Raft log are gone everywhere.
func TestClusterEveryNodeLosesPower(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	c := newMemCluster(t, 3)
	if _, err := c.nodes[1].b.CreateTopic(TopicSettings{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	c.produceTo("t", "a", 200) // snapshots every 25 entries, the Raft log compacted behind them
	var want []byte
	c.eventually(t, "every replica's Raft log compacted past 50 entries, and the same records", func() error {
		var first []byte
		for _, id := range c.ids {
			cp, index, err := c.storedCheckpoint(id, "t")
			if err != nil || len(cp) < 16 || index < 100 {
				return fmt.Errorf("n%d: a snapshot at %d (%v)", id, index, err)
			}
			h := c.mustPart(c.nodes[id].b, "t", 0).repl.Load()
			st, err := c.nodes[id].eng.Group(h.group)
			if err != nil {
				return err
			}
			if fi, err := st.FirstIndex(); err != nil || fi < 50 {
				return fmt.Errorf("n%d: its Raft log starts at %d (%v)", id, fi, err)
			}
			start, raw, err := rawLog(c.nodes[id].b, "t")
			if err != nil || start != 0 {
				return fmt.Errorf("n%d: log from %d: %v", id, start, err)
			}
			if first == nil {
				first = raw
			} else if string(raw) != string(first) {
				return fmt.Errorf("n%d holds other records", id)
			}
		}
		want = first
		return nil
	})
	for _, id := range c.ids {
		c.crash(id, true)
	}
	for _, id := range c.ids {
		c.start(id)
	}
	c.eventually(t, "every replica back with every record acknowledged before the power cut", func() error {
		for _, id := range c.ids {
			_, raw, err := rawLog(c.nodes[id].b, "t")
			if err != nil {
				return fmt.Errorf("n%d: %v", id, err)
			}
			if len(raw) < len(want) || string(raw[:len(want)]) != string(want) {
				return fmt.Errorf("n%d holds %d bytes of records, %d before the cut", id, len(raw), len(want))
			}
		}
		return nil
	})
	c.produceTo("t", "b", 5) // and the partition still takes writes
}
