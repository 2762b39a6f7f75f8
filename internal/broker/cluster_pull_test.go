package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// produceTo produces n records value-prefix-i to topic/0 through whoever leads it.
func (c *memCluster) produceTo(topic, prefix string, n int) {
	c.t.Helper()
	p := int32(0)
	for i := range n {
		for attempt := 0; ; attempt++ {
			if attempt == 400 {
				c.t.Fatalf("no leader for %s/0 for 4 s: %s", topic, c.describe())
			}
			b := c.leaderOf(topic, 0)
			if b == nil {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err := b.Produce(ctx, topic, []ProduceRecord{{Value: []byte(fmt.Sprintf("%s-%d", prefix, i)), Partition: &p}}, ProduceOptions{})
			cancel()
			if errors.Is(err, ErrNotLeader) || errors.Is(err, ErrClosed) || errors.Is(err, ErrReplicationUnknown) {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			if err != nil {
				c.t.Fatalf("produce %d: %v", i, err)
			}
			break
		}
	}
}

// rawLog is every byte of a replica's local log of topic/0, batch by batch (offsets,
// epochs, CRCs and all), and its start offset.
func rawLog(b *Broker, topic string) (int64, []byte, error) {
	_, part, err := b.streams.partition(topic, 0)
	if err != nil {
		return 0, nil, err
	}
	var out []byte
	for off := part.log.LogStartOffset(); off < part.log.HighWatermark(); {
		rd, err := part.log.Read(off, 1<<20)
		if err != nil || len(rd) == 0 {
			return 0, nil, fmt.Errorf("read at %d: %v", off, err)
		}
		out = append(out, rd...)
		off = part.log.HighWatermark()
		if n, err := nextOffset(rd); err == nil {
			off = n
		}
	}
	return part.log.LogStartOffset(), out, nil
}

func nextOffset(rd []byte) (int64, error) {
	var next int64
	for len(rd) > 0 {
		h, err := batch.ParseHeader(rd)
		if err != nil {
			return 0, err
		}
		next = h.NextOffset()
		rd = rd[h.Size():]
	}
	return next, nil
}

// wipeFollower stops a follower of topic/0 and deletes its local log of it (its Raft state
// stays), and returns it, stopped.
func (c *memCluster) wipeFollower(topic string) multiraft.NodeID {
	c.t.Helper()
	var follower multiraft.NodeID
	for _, id := range c.ids {
		if c.leaderOf(topic, 0) != c.nodes[id].b {
			follower = id
			break
		}
	}
	_, part, err := c.nodes[follower].b.streams.partition(topic, 0)
	if err != nil {
		c.t.Fatal(err)
	}
	dir := part.dir
	c.stop(follower)
	if err := vfs.RemoveAll(c.nodes[follower].fs, dir); err != nil {
		c.t.Fatal(err)
	}
	return follower
}

// TestClusterWipedReplicaPulls: a follower's local partition log is deleted while it is
// stopped (its Raft state kept, compacted past the start of the partition). At restart the
// group's snapshot names records its log lacks: Restore pulls them from a peer, and the
// follower ends with the leader's log byte for byte (offsets, leader epochs, CRCs). The
// Raft log of the partition stays bounded while far more than SnapshotEntries entries are
// produced: it holds the entries of about two snapshot intervals, not the partition.
func TestClusterWipedReplicaPulls(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	c := newMemCluster(t, 3)
	if _, err := c.nodes[1].b.CreateTopic(TopicSettings{Name: "w", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	c.produceTo("w", "a", 300) // 300 entries; a snapshot every 25
	follower := c.wipeFollower("w")
	if _, err := c.nodes[follower].fs.Stat(filepath.Join("/raft")); err != nil {
		t.Fatalf("the Raft state went too: %v", err)
	}
	c.start(follower)
	c.produceTo("w", "b", 20)
	waitSame(t, c, "w", follower)
	if st := c.nodes[follower].b.ReplicaPullStats(); st.Pulls == 0 || st.Bytes == 0 {
		t.Fatalf("the wiped follower did not pull: %+v", st)
	}

	c.produceTo("w", "c", 300)
	waitSame(t, c, "w", follower)
	waitCompacted(t, c, "w")
}

// waitCompacted checks that every replica's Raft log of topic/0 is compacted behind its
// checkpoints: never past its last snapshot (the checkpoint its local log holds), and,
// once two more snapshot intervals of entries came, past every entry the longest log held
// when this began (a replica that lags, neither the leader nor the wiped follower, catches
// up meanwhile). That is the bound exactly: the log keeps the entries since the snapshot
// before the last one, and an interval is SnapshotEntries (25) or more when one Ready
// applies more (a follower catching up takes up to 1 MiB of entries at once: a follower
// seen 245 behind its last snapshot under load failed a fixed bound of 200 entries).
// Records are produced until then, 5 at a time, 400 at most; without compaction (the
// first index stays 1) that never happens.
func waitCompacted(t *testing.T, c *memCluster, topic string) {
	t.Helper()
	sts := map[multiraft.NodeID]multiraft.Storage{}
	var mark uint64 // the longest log's last index at the start
	for _, id := range c.ids {
		nd := c.nodes[id]
		_, p, err := nd.b.streams.partition(topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		st, err := nd.eng.Group(p.repl.Load().group)
		if err != nil {
			t.Fatal(err)
		}
		last, _ := st.LastIndex()
		sts[id], mark = st, max(mark, last)
	}
	if mark < 600 { // 620 entries produced
		t.Fatalf("the partition's longest Raft log ends at %d", mark)
	}
	for produced := 0; ; produced += 5 {
		var behind []string
		for _, id := range c.ids {
			first, _ := sts[id].FirstIndex()
			snap, err := sts[id].Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			// FirstIndex is the compaction point + 1. The snapshot is read after it, so a
			// snapshot taken in between only makes snap larger.
			if si := snap.Metadata.Index; first-1 > si {
				t.Fatalf("n%d: the partition's Raft log is compacted to %d, past its snapshot at %d", id, first-1, si)
			}
			if first-1 < mark {
				behind = append(behind, fmt.Sprintf("n%d holds %d.. (snapshot at %d; wanted past %d)", id, first, snap.Metadata.Index, mark))
			}
		}
		if len(behind) == 0 {
			return
		}
		if produced >= 400 {
			t.Fatalf("the partition's Raft log is not compacted behind the checkpoints after %d more entries: %s", produced, strings.Join(behind, "; "))
		}
		c.produceTo(topic, fmt.Sprintf("d%d", produced), 5)
	}
}

// waitSame waits until follower's local log of topic/0 is the leader's, byte for byte.
func waitSame(t *testing.T, c *memCluster, topic string, follower multiraft.NodeID) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var why string
		l := c.leaderOf(topic, 0)
		if l == nil {
			why = "no leader"
		} else {
			ls, lb, lerr := rawLog(l, topic)
			fs, fb, ferr := rawLog(c.nodes[follower].b, topic)
			switch {
			case lerr != nil || ferr != nil:
				why = fmt.Sprintf("leader %v, follower %v", lerr, ferr)
			case ls != fs || !bytes.Equal(lb, fb):
				why = fmt.Sprintf("leader's log from %d, %d bytes; follower's from %d, %d bytes", ls, len(lb), fs, len(fb))
			default:
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("n%d's log is not the leader's after 20 s: %s%s", follower, why, strings.TrimSpace(c.describe()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestClusterWipedReplicaPullsFromAStartInsideABatch: DeleteRecords to an offset inside a
// batch leaves every replica's log starting there, the batch that holds it kept whole. A
// follower whose local log is wiped pulls the checkpoint's records from a peer: the batch
// across the log start is sent whole, and the follower starts its log at the same offset.
// Before, the source refused to serve a batch that began below the offset asked for, every
// peer alike, and the wiped replica never caught up ("batch at 10..20 where offset 15 was
// wanted").
func TestClusterWipedReplicaPullsFromAStartInsideABatch(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	c := newMemCluster(t, 3)
	if _, err := c.nodes[1].b.CreateTopic(TopicSettings{Name: "w", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	p := int32(0)
	for i := range 5 { // five batches of ten records
		recs := make([]ProduceRecord, 10)
		for k := range recs {
			recs[k] = ProduceRecord{Value: fmt.Appendf(nil, "a-%d", i*10+k), Partition: &p}
		}
		for {
			l := c.leaderOf("w", 0)
			if l == nil {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			if _, err := l.Produce(context.Background(), "w", recs, ProduceOptions{}); err != nil {
				if errors.Is(err, ErrNotLeader) {
					continue
				}
				t.Fatal(err)
			}
			break
		}
	}
	start, err := c.leaderOf("w", 0).DeleteRecords(context.Background(), "w", 0, 15)
	if err != nil || start != 15 {
		t.Fatalf("DeleteRecords to 15: start %d, %v", start, err)
	}
	c.produceTo("w", "b", 60) // past the next snapshots, which cover the trim (a snapshot every 25 entries)
	follower := c.wipeFollower("w")
	c.start(follower)
	c.produceTo("w", "c", 5)
	waitSame(t, c, "w", follower)
	if s, _, _ := rawLog(c.nodes[follower].b, "w"); s != 15 {
		t.Fatalf("the wiped follower's log starts at %d, want 15", s)
	}
}
