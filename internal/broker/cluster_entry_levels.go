package broker

// Feature levels for the entries of partition and queue groups (docs/cluster.md, "Upgrades:
// one node at a time, and the feature level"), as groupEventLevels is for the group records
// of the metadata log and meta's opLevels for the catalog's own: a replica stops a group
// on an entry it cannot decode, so an entry of a new kind waits until the cluster's level
// admits it, that is until every node reads it. Each replicated partition and queue asks
// before every proposal (replpart.Partition.SetAdmit, replqueue.Queue.SetAdmit).

import (
	"fmt"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/cluster/replcursor"
	"github.com/sluice-mq/sluice/internal/cluster/replpart"
	"github.com/sluice-mq/sluice/internal/cluster/replqueue"
)

// queueOpLevels is the feature level that admits each op in a queue's group. A new op must
// be listed (TestEveryDataEntryHasALevel), at a new level when an older build cannot decode
// it.
var queueOpLevels = map[replqueue.Op]int{
	replqueue.OpSend: meta.LevelBase, replqueue.OpReceive: meta.LevelBase, replqueue.OpAck: meta.LevelBase,
	replqueue.OpNack: meta.LevelBase, replqueue.OpExtend: meta.LevelBase, replqueue.OpPut: meta.LevelBase,
	replqueue.OpReceiveLimited: meta.LevelBase, replqueue.OpDeadDone: meta.LevelBase,
	replqueue.OpPurge: meta.LevelBase, replqueue.OpConfigure: meta.LevelBase,
	replqueue.OpNackReason: meta.LevelDeadLetterHistory,
}

// partitionEntryLevels is the feature level that admits each kind of entry in a
// partition's group: produces, trims and subscription cursors' entries. A new kind must be
// listed (TestEveryDataEntryHasALevel), at a new level when an older build cannot decode it.
var partitionEntryLevels = map[replpart.EntryKind]int{
	replpart.ProduceEntry: meta.LevelBase, replpart.TrimKind: meta.LevelBase, replpart.ForgetKind: meta.LevelProducerExpiry,
	replpart.CursorKind(replpart.CursorCreate): meta.LevelBase, replpart.CursorKind(replpart.CursorDelete): meta.LevelBase,
	replpart.CursorKind(replcursor.Receive): meta.LevelBase, replpart.CursorKind(replcursor.Ack): meta.LevelBase,
	replpart.CursorKind(replcursor.Nack): meta.LevelBase, replpart.CursorKind(replcursor.Extend): meta.LevelBase,
	replpart.CursorKind(replpart.CursorReceiveLimited): meta.LevelBase, replpart.CursorKind(replpart.CursorDeadDone): meta.LevelBase,
	replpart.CursorKind(replpart.CursorSkipTo): meta.LevelBase, replpart.CursorKind(replpart.CursorDeadLetter): meta.LevelBase,
}

// admitQueueOp is a hosted queue's admit function.
func (c *clusterRT) admitQueueOp(op replqueue.Op) error {
	need, listed := queueOpLevels[op]
	return c.admitLevel(need, listed, func() string { return fmt.Sprintf("queue op %d", op) })
}

// admitPartitionEntry is a hosted partition's admit function.
func (c *clusterRT) admitPartitionEntry(k replpart.EntryKind) error {
	need, listed := partitionEntryLevels[k]
	return c.admitLevel(need, listed, k.String)
}

// admitLevel refuses what needs a level above the catalog's, and what has no level at all
// (a kind added without one: never written, rather than written for older replicas to stop on).
// It runs before every proposal of every partition and queue: what names the entry only
// for an error, so an admitted one costs a map lookup and no allocation.
func (c *clusterRT) admitLevel(need int, listed bool, what func() string) error {
	if !listed {
		return fmt.Errorf("%w: %s has no feature level in this build", meta.ErrFeatureLevel, what())
	}
	st := c.meta.State()
	if need <= st.FeatureLevel() {
		return nil
	}
	return st.Admits(need, what())
}
