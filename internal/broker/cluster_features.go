package broker

// Feature levels in a cluster (meta/features.go; docs/cluster.md, "Upgrades").
//
// The metadata leader raises the catalog's feature level once every member reads a higher
// one, and whatever writes an entry of a newer kind waits for the level that admits it. The
// only such kind so far is the consumer groups' membership records
// (meta.LevelGroupMembers): below it the coordinator keeps members in memory only, as
// before the records existed, and a controller change makes every group rejoin.

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
	"github.com/sluice-mq/sluice/internal/group"
)

// groupEventLevels is the feature level that admits each group event type in the metadata
// log (inside meta.OpGroupOffsets). A new type must be listed (TestEveryGroupEventHasALevel),
// at a new level when an older build cannot decode it.
var groupEventLevels = map[group.EventType]int{
	group.EventOffsetsCommitted: meta.LevelBase, group.EventGroupDeleted: meta.LevelBase,
	group.EventOffsetsDeleted: meta.LevelBase, group.EventGroupProtocol: meta.LevelBase,
	group.EventGroupMembers: meta.LevelGroupMembers, group.EventConsumerMembers: meta.LevelGroupMembers,
}

// groupEventsLevel is the level evs need: the highest of their types' (a type not listed
// needs more than any level, so it is never proposed).
func groupEventsLevel(evs []group.Event) int {
	level := meta.LevelBase
	for _, ev := range evs {
		l, ok := groupEventLevels[ev.Type]
		if !ok {
			return math.MaxInt
		}
		level = max(level, l)
	}
	return level
}

// featureAskTimeout bounds one round of questions (a member down answers nothing).
const featureAskTimeout = 2 * time.Second

// recordsMembership reports whether the catalog admits consumer-group membership records
// (nil c: a single node, whose coordinator never records them).
func (c *clusterRT) recordsMembership() bool {
	return c != nil && c.meta.State().FeatureLevel() >= meta.LevelGroupMembers
}

// checkpointsCarryState reports whether the catalog admits partition checkpoints with the
// producer and transaction state (cluster_replica_state.go).
func (c *clusterRT) checkpointsCarryState() bool {
	return c.meta.State().FeatureLevel() >= meta.LevelPartitionState
}

// featureRound is the reconcile loop's step for feature levels: turn on what the catalog's
// level admits, and on the metadata leader, raise the level when every member reads more.
func (c *clusterRT) featureRound() {
	if !c.membershipsOn.Load() && c.recordsMembership() {
		// Once: a coordinator made after this (a rebuild) reads the level itself.
		if g, err := c.b.groups(); err == nil {
			g.recordMemberships()
			c.membershipsOn.Store(true)
		}
	}
	if large := c.meta.GroupStateTooLarge(); large != c.stateLargeNoted.Load() {
		c.stateLargeNoted.Store(large)
		if large {
			c.log.Warn("cluster: the consumer groups' state no longer fits a metadata snapshot: the metadata log is no longer compacted, and a follower that falls behind what was compacted lacks the groups (docs/cluster.md, \"Compaction\")",
				"max_bytes", meta.MaxGroupStateBytes)
		} else {
			c.log.Info("cluster: the consumer groups' state fits a metadata snapshot again")
		}
	}
	// Asked every round (each second, and at each catalog change such as a restarted
	// node registering again) while some member reads less: one small request to each,
	// which costs nothing beside the heartbeats, and a member upgraded is seen at once.
	st := c.meta.State()
	if reads := c.meta.AdvertisedFeatureLevel(); reads < st.FeatureLevel() && !c.featureCapNoted.Swap(true) {
		c.log.Warn("cluster: --cluster-max-feature-level is below the cluster's feature level, which never falls: this node reads it all the same",
			"level", st.FeatureLevel(), "max_feature_level", reads)
	}
	if st.FeatureLevel() >= meta.MaxFeatureLevel || c.cat.Leader() != c.node || c.featureAsking.Load() {
		if st.FeatureLevel() >= meta.MaxFeatureLevel {
			c.featureBehind.Store(nil)
		}
		return
	}
	c.featureAsking.Store(true)
	if !c.background(func(ctx context.Context) {
		defer c.featureAsking.Store(false)
		c.raiseFeatureLevel(ctx, st)
	}) {
		c.featureAsking.Store(false)
	}
}

// raiseFeatureLevel asks every member of st (and of the metadata group) what level it
// reads and commits the lowest answer if it is above st's level. A member that cannot
// answer (down, or a binary from before feature levels) holds the level where it is; the
// log says which one.
func (c *clusterRT) raiseFeatureLevel(ctx context.Context, st *meta.State) {
	ctx, cancel := context.WithTimeout(ctx, featureAskTimeout)
	defer cancel()
	level := meta.MaxFeatureLevel
	var behind []string
	// The catalog's members, and the metadata group's voters and learners: a node that
	// votes but has not registered yet (starting up) may run an older binary too.
	members := st.FeatureLevelMembers()
	gs, err := c.host.Status(meta.Group)
	if err != nil {
		return
	}
	members = append(append(members, gs.Voters...), gs.Learners...)
	slices.Sort(members)
	members = slices.Compact(members)
	for _, id := range members {
		l, err := c.cat.NodeFeatureLevel(ctx, id)
		if err != nil {
			level = min(level, meta.LevelBase)
			behind = append(behind, fmt.Sprintf("node %d (%v)", id, err))
			continue
		}
		if l < meta.MaxFeatureLevel {
			behind = append(behind, fmt.Sprintf("node %d (level %d)", id, l))
		}
		level = min(level, l)
	}
	if last := c.featureBehind.Swap(&behind); last == nil || !slices.Equal(*last, behind) {
		if len(behind) > 0 { // said once per change, not every round
			c.log.Warn("cluster: the feature level stays until these nodes read a newer one (upgrade them, or lift --cluster-max-feature-level)",
				"level", st.FeatureLevel(), "this_binary_reads", meta.MaxFeatureLevel, "behind", behind)
		}
	}
	if level <= st.FeatureLevel() {
		return
	}
	if err := c.cat.RaiseFeatureLevel(ctx, level); err != nil {
		c.log.Warn("cluster: feature level not raised; trying again", "level", level, "err", err)
		return
	}
	c.log.Info("cluster: feature level raised: every member reads it", "level", level, "members", len(members))
}

// recordMemberships turns the coordinator's membership records on (once every node reads
// them; a no-op after that), and on the serving controller proposes every group's record,
// so a controller change from now on keeps the groups formed before. Nobody waits for it,
// as for resumeLocked's: an entry of this term that never commits means the term ended,
// and the coordinator is rebuilt from the log before it serves again.
func (g *groupRT) recordMemberships() {
	g.lockForRead()
	defer g.mu.Unlock()
	out := g.coord.RecordMemberships()
	if len(out.Events) == 0 || g.cl == nil || !g.cl.serving() {
		return // another node's records are the log's: the controller proposes them
	}
	if _, err := g.cl.propose(out.Events); err != nil {
		g.cl.uncommittedLocked(err)
	}
}

// GroupStateTooLarge reports whether this node's last metadata snapshot could not carry
// the consumer groups' state (meta.Machine.GroupStateTooLarge; false on a single node).
func (b *Broker) GroupStateTooLarge() bool {
	return b.cluster != nil && b.cluster.meta.GroupStateTooLarge()
}

// FeatureLevels returns the catalog's feature level and the one this node says it reads
// (0, 0 on a single node).
func (b *Broker) FeatureLevels() (level, reads int) {
	if b.cluster == nil {
		return 0, 0
	}
	return b.cluster.meta.State().FeatureLevel(), b.cluster.meta.AdvertisedFeatureLevel()
}
