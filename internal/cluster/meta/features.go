package meta

// Feature levels: which kinds of entry the cluster's logs may hold.
//
// A node meeting an entry it cannot decode stops the group (Decode, and the broker's
// group-event decoder): skipping it would let its state drift from the others'. So a
// rolling upgrade, one node after another, is safe only if no node writes an entry of a
// new kind while an older binary still runs somewhere. Kafka's KRaft solves the same
// problem with metadata.version (KIP-584, KIP-778); this is that, made automatic:
//
//   - every binary reads up to MaxFeatureLevel and answers a peer's question about it
//     (ServeRequest; a node may advertise less, Machine.AdvertiseFeatureLevel, to hold a
//     cluster back while an upgrade is on trial);
//   - the metadata leader asks every member, and once all of them read a higher level
//     than the catalog's, it commits OpSetFeatureLevel (the broker's loop,
//     cluster_features.go);
//   - whatever writes an entry of a newer kind first checks State.FeatureLevel.
//
// A level is never lowered: once the log holds the new kinds, an older binary could not
// read it back. A binary that meets a level above its own stops the metadata group with an
// error that says so (Apply, Restore) rather than fail later on an entry it cannot read. A
// binary from before levels existed answers no request of the metadata group, which the
// leader counts as LevelBase.

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// The feature levels, oldest first. A new kind of entry (a meta command, a group event
// carried by OpGroupOffsets, a partition or queue entry) gets a new level here.
const (
	// LevelBase is every entry kind before levels existed; a catalog that never
	// committed OpSetFeatureLevel is at it.
	LevelBase = 1
	// LevelGroupMembers adds consumer groups' membership records (the group package's
	// EventGroupMembers and EventConsumerMembers inside OpGroupOffsets) and
	// OpSetFeatureLevel itself.
	LevelGroupMembers = 2
	// LevelGroupState adds metadata snapshots that carry the whole consumer-group state
	// (snapshot version 15, groupstate.go), which a node restoring one puts in place of
	// its own; from then on the metadata log is compacted behind its snapshots.
	LevelGroupState = 3
	// LevelPartitionState adds partition checkpoints (the partition groups' Raft
	// snapshots) that carry the idempotent producers' and the transactions' state, which
	// a replica restoring one puts in place of a scan of its log (the broker's
	// cluster_replica_state.go).
	LevelPartitionState = 4
	// LevelProducerExpiry adds partition entries that forget idle idempotent producers
	// (replpart's forget entries: Kafka's producer.id.expiration.ms in a cluster).
	LevelProducerExpiry = 5
	// LevelDeadLetterHistory adds dead-letter copies whose header carries the message's
	// history (copy header version 3, the broker's cluster_queues_envelope.go): its
	// original send time, first and last receive, last nack reason. An older build reads
	// such a copy as a message it cannot decode.
	LevelDeadLetterHistory = 6
	// LevelReceiptKey adds the cluster's receipt key: OpSetFeatureLevel to this level or
	// above carries a key (the first one committed is kept), and a metadata snapshot at it
	// holds the key after the level. The broker then hands out authenticated receipts for
	// replicated queues and subscriptions, as a single node does with its data directory's
	// key, so none can be forged from a delivery's offset and fencing token.
	LevelReceiptKey = 7

	// MaxFeatureLevel is the newest level this binary reads.
	MaxFeatureLevel = LevelReceiptKey
)

// ReceiptKeyLen is the receipt key's length: an HMAC-SHA256 key.
const ReceiptKeyLen = 32

// OpSetFeatureLevel raises the catalog's feature level to Level (a lower or equal level
// changes nothing). Only the metadata leader proposes it, once every member reads Level.
const OpSetFeatureLevel Op = 18

// opLevels is the feature level that admits each op: the catalog proposes none above the
// level it is at (checkOpLevel). A new op must be listed here (TestEveryOpHasALevel), at a
// new level when an older build cannot decode it.
var opLevels = map[Op]int{
	OpRegisterNode: LevelBase, OpCreateTopic: LevelBase, OpDeleteTopic: LevelBase,
	OpAddPartitions: LevelBase, OpUpdateTopic: LevelBase, OpGroupOffsets: LevelBase,
	OpCreateQueue: LevelBase, OpDeleteQueue: LevelBase, OpUpdateQueue: LevelBase,
	OpAddNode: LevelBase, OpRemoveNode: LevelBase, OpMoveReplica: LevelBase, OpMoveDone: LevelBase,
	OpSetGroupConfig: LevelBase, OpSetTxn: LevelBase, OpReassign: LevelBase, OpCancelReassign: LevelBase,
	// Proposed only once every member reads the level it sets, which is at least this.
	OpSetFeatureLevel: LevelGroupMembers,
}

// checkOpLevel refuses to propose cmd while the catalog's level does not admit its op: an
// older member would stop on it. OpSetFeatureLevel is what raises the level, so it is
// admitted below its own.
func (c *Catalog) checkOpLevel(cmd *Command) error {
	if cmd.Op == OpSetFeatureLevel {
		return nil
	}
	return c.sm.State().Admits(opLevels[cmd.Op], "this change")
}

// maxLevelEncoded bounds a decoded level (a level is a small counter).
const maxLevelEncoded = 1 << 15

// ErrFeatureLevel: a feature level this binary does not read, or that a member does not.
var ErrFeatureLevel = errors.New("meta: feature level")

// FeatureLevel is the catalog's feature level: what kinds of entry every member reads.
func (s *State) FeatureLevel() int {
	return max(s.Level, LevelBase)
}

// Admits refuses, with ErrFeatureLevel, what needs level need while the catalog is below
// it (what names it in the error): an older member would stop on it. Every writer of an
// entry of a newer kind asks it first (checkOpLevel, ProposeGroupOffsetsAsync, the
// broker's data groups).
func (s *State) Admits(need int, what string) error {
	if at := s.FeatureLevel(); need > at {
		return fmt.Errorf("%w %d is needed for %s, and the cluster is at %d: some node runs an older sluice (sluice cluster status on the controller names it)",
			ErrFeatureLevel, need, what, at)
	}
	return nil
}

// checkLevel refuses a level this binary does not read: the group stops on it (Apply,
// Restore), with an error an operator can act on.
func checkLevel(level int) error {
	if level > MaxFeatureLevel {
		return fmt.Errorf("%w %d: the cluster's log needs a newer sluice on this node (this binary reads up to level %d)",
			ErrFeatureLevel, level, MaxFeatureLevel)
	}
	return nil
}

func (s *State) setFeatureLevel(level int, key []byte) Result {
	s.Level = max(s.Level, level)
	if s.ReceiptKey == nil && s.Level >= LevelReceiptKey && len(key) == ReceiptKeyLen {
		s.ReceiptKey = key
	}
	return Result{}
}

// receiptKey reads a level's receipt key (a command's or a snapshot's): present
// from LevelReceiptKey, empty or ReceiptKeyLen bytes.
func (d *decoder) receiptKey(level int) []byte {
	if level < LevelReceiptKey || d.Err != nil {
		return nil
	}
	k := d.Bytes(ReceiptKeyLen)
	if len(k) != 0 && len(k) != ReceiptKeyLen {
		d.Fail("receipt key of %d bytes", len(k))
		return nil
	}
	if len(k) == 0 {
		return nil
	}
	return slices.Clone(k)
}

// level reads a snapshot's feature level into s: one this binary reads, above LevelBase
// (a snapshot at LevelBase has no level).
func (d *decoder) level(s *State) {
	l := d.Uvarint()
	switch {
	case d.Err != nil:
	case l <= LevelBase || l > maxLevelEncoded:
		d.Fail("feature level %d", l)
	default:
		if err := checkLevel(int(l)); err != nil {
			d.Err = err
			return
		}
		s.Level = int(l)
	}
}

// The metadata group's requests (multiraft.RequestServer): a kind byte, then its body.
const (
	requestFeatureLevel      = 1
	requestRefusesLeadership = 2 // nodestate.go: once "is your disk full"
	requestLeaders           = 3 // nodestate.go
	requestListeners         = 4 // listeners.go
)

// AdvertiseFeatureLevel sets the level this node tells the leader it reads: at most
// MaxFeatureLevel (the default), at least LevelBase. An operator holding a cluster at a
// level (so that a node may still go back to an older binary) advertises that level on
// one node.
func (m *Machine) AdvertiseFeatureLevel(level int) {
	m.advertised.Store(int64(min(max(level, LevelBase), MaxFeatureLevel)))
}

// AdvertisedFeatureLevel is what AdvertiseFeatureLevel set.
func (m *Machine) AdvertisedFeatureLevel() int { return int(m.advertised.Load()) }

// ServeRequest answers a peer's question about this node (multiraft.RequestServer;
// called concurrently with Apply, so it reads only what is safe to).
func (m *Machine) ServeRequest(_ multiraft.NodeID, req []byte) ([]byte, error) {
	if len(req) == 1 {
		switch req[0] {
		case requestFeatureLevel:
			return binary.AppendUvarint(nil, uint64(m.AdvertisedFeatureLevel())), nil
		case requestRefusesLeadership: // nodestate.go
			if m.refusingLeadership() {
				return []byte{1}, nil
			}
			return []byte{0}, nil
		case requestLeaders: // nodestate.go
			if b := m.leaders(); b != nil {
				return b, nil
			}
			return nil, fmt.Errorf("meta: this node does not say which groups it leads yet")
		case requestListeners: // listeners.go
			if l := m.listeners.Load(); l != nil {
				return l.encode(), nil
			}
			// Not told yet (the node is starting): not "none", which would be kept.
			return nil, fmt.Errorf("meta: this node does not say what its listeners are yet")
		}
	}
	return nil, fmt.Errorf("meta: unknown request of %d bytes", len(req))
}

// NodeFeatureLevel asks node what feature level it reads. A node that cannot be asked,
// or answers no such request (a binary from before feature levels), is an error: the
// caller must not count on it reading any level above LevelBase.
func (c *Catalog) NodeFeatureLevel(ctx context.Context, node multiraft.NodeID) (int, error) {
	if node == c.host.Node() {
		return c.sm.AdvertisedFeatureLevel(), nil
	}
	b, err := c.host.Request(ctx, node, Group, []byte{requestFeatureLevel})
	if err != nil {
		return 0, err
	}
	v, n := binary.Uvarint(b)
	if n != len(b) || v < LevelBase || v > maxLevelEncoded {
		return 0, fmt.Errorf("%w: node %d answered %d bytes that are no level", ErrFeatureLevel, node, len(b))
	}
	return int(v), nil
}

// FeatureLevelMembers are the nodes that must read a level before the catalog is raised to
// it: every registered member, and every node added that has not registered yet (it may
// be starting an older binary).
func (s *State) FeatureLevelMembers() []multiraft.NodeID {
	ids := s.members()
	for id := range s.Joined {
		if _, ok := s.Node(id); !ok && !s.Removed[id] {
			ids = append(ids, id)
		}
	}
	return ids
}

// RaiseFeatureLevel commits OpSetFeatureLevel on the metadata leader (ErrNotLeader on
// another node). It refuses a level this binary does not read; the caller has checked
// that every member reads it (FeatureLevelMembers, NodeFeatureLevel).
func (c *Catalog) RaiseFeatureLevel(ctx context.Context, level int) error {
	if err := checkLevel(level); err != nil {
		return err
	}
	if level <= c.sm.State().FeatureLevel() {
		return nil
	}
	cmd := Command{Op: OpSetFeatureLevel, Level: level}
	if level >= LevelReceiptKey && c.sm.State().ReceiptKey == nil {
		// Every raise to the level carries one; apply keeps the first committed.
		cmd.Payload = make([]byte, ReceiptKeyLen)
		if _, err := rand.Read(cmd.Payload); err != nil {
			return fmt.Errorf("meta: receipt key: %w", err)
		}
	}
	_, err := c.do(ctx, cmd)
	return err
}
