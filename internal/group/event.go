package group

import (
	"encoding/binary"
	"fmt"
	"time"
)

// EventType says what an Event records.
type EventType uint8

const (
	// EventOffsetsCommitted sets committed offsets (a commit or a reset).
	EventOffsetsCommitted EventType = 1
	// EventGroupDeleted removes a group and all its offsets.
	EventGroupDeleted EventType = 2
	// EventOffsetsDeleted removes the listed partitions' offsets (only
	// Topic and Partition of each entry matter): OffsetDelete, or a
	// deleted topic.
	EventOffsetsDeleted EventType = 3
	// EventGroupProtocol records a group's protocol type and assignment
	// mode, set when its first member joins, so an Empty group describes
	// itself the same after a restart (Kafka keeps it in GroupMetadata);
	// mode ConsumerProtocol makes it a KIP-848 consumer group again.
	EventGroupProtocol EventType = 4
	// EventGroupMembers records a classic group's membership
	// (Config.DurableMembership only; membership.go): replaying it
	// replaces the group's generation, state and members.
	EventGroupMembers EventType = 5
	// EventConsumerMembers records a KIP-848 consumer group's state
	// (Config.DurableMembership only; consumer_record.go).
	EventConsumerMembers EventType = 6
)

// EventTypes lists every event type this build encodes and decodes, oldest
// first. A cluster writes a type only at the feature level that admits it
// (the broker's table, which a test keeps complete against this list).
func EventTypes() []EventType {
	return []EventType{EventOffsetsCommitted, EventGroupDeleted, EventOffsetsDeleted, EventGroupProtocol,
		EventGroupMembers, EventConsumerMembers}
}

// Membership reports whether ev records a group's membership (either
// kind): in a cluster the coordinator that proposed it already holds it.
func (ev Event) Membership() bool {
	return ev.Type == EventGroupMembers || ev.Type == EventConsumerMembers
}

// Event is a change that must survive a broker restart: committed offsets
// and their deletion, a group's protocol type, and group deletion; and,
// with Config.DurableMembership, a classic group's membership. Without it
// (a single node) membership, generations and assignments are not
// journaled: after a restart every group is Empty; Kafka clients get
// ErrUnknownMember or ErrIllegalGeneration, rejoin, and resume from their
// committed offsets, which costs one rebalance and saves a write per
// membership change. A cluster records them, so a coordinator's failover
// does not cost every group a rebalance.
type Event struct {
	Type    EventType
	Group   string
	Time    time.Time         // commit or deletion time (ms); not for EventGroupDeleted
	Offsets []CommittedOffset // EventOffsetsCommitted, EventOffsetsDeleted

	ProtocolType string     // EventGroupProtocol, EventGroupMembers: "consumer" for Kafka consumers
	Mode         AssignMode // EventGroupProtocol, EventGroupMembers

	Members  *Membership         // EventGroupMembers
	Consumer *ConsumerMembership // EventConsumerMembers
}

// Apply replays ev into c, as at start-up from the journal. Replaying an
// event twice is harmless: commits overwrite, deletions of a missing group
// do nothing.
func (c *Coordinator) Apply(ev Event) error {
	if err := ev.validate(); err != nil {
		return err
	}
	switch ev.Type {
	case EventGroupDeleted:
		if g := c.groups[ev.Group]; g != nil && len(g.members) == 0 {
			delete(c.groups, ev.Group)
		}
	case EventOffsetsCommitted:
		c.getOrCreate(ev.Group).apply(ev)
	case EventOffsetsDeleted:
		if g := c.groups[ev.Group]; g != nil {
			g.apply(ev)
		}
	case EventGroupProtocol:
		g := c.getOrCreate(ev.Group)
		if len(g.members) > 0 || (g.cg != nil && len(g.cg.members) > 0) {
			break
		}
		g.protocolType, g.mode = ev.ProtocolType, ev.Mode
		switch {
		case ev.Mode == ConsumerProtocol && g.cg == nil:
			g.cg = newConsumerGroup()
		case ev.Mode != ConsumerProtocol:
			g.cg = nil
		}
	case EventGroupMembers:
		if g := c.groups[ev.Group]; g != nil && g.cg != nil && len(g.cg.members) > 0 {
			break // a consumer group with members now: the record is of an older life
		}
		c.applyMembers(ev)
	case EventConsumerMembers:
		if g := c.groups[ev.Group]; g != nil && g.cg == nil && len(g.members) > 0 {
			break // a classic group with members now: the record is of an older life
		}
		return c.applyConsumer(ev)
	}
	return nil
}

func (g *group) apply(ev Event) {
	g.ownOffsets()
	for _, o := range ev.Offsets {
		tp := topicPartition{o.Topic, o.Partition}
		if ev.Type == EventOffsetsDeleted {
			delete(g.offsets, tp)
		} else {
			g.offsets[tp] = o.Committed
		}
	}
}

func (ev Event) validate() error {
	if ev.Group == "" {
		return fmt.Errorf("%w: empty group", ErrCorruptEvent)
	}
	if ev.Type != EventGroupProtocol && ev.Type != EventGroupMembers && (ev.ProtocolType != "" || ev.Mode != 0) {
		return fmt.Errorf("%w: protocol in a type %d event", ErrCorruptEvent, ev.Type)
	}
	if (ev.Type == EventGroupMembers) != (ev.Members != nil) || (ev.Type == EventConsumerMembers) != (ev.Consumer != nil) {
		return fmt.Errorf("%w: members in a type %d event", ErrCorruptEvent, ev.Type)
	}
	switch ev.Type {
	case EventGroupDeleted:
		if len(ev.Offsets) > 0 {
			return fmt.Errorf("%w: deletion with offsets", ErrCorruptEvent)
		}
	case EventGroupProtocol:
		if len(ev.Offsets) > 0 || ev.ProtocolType == "" || ev.Mode > ConsumerProtocol {
			return fmt.Errorf("%w: protocol %q mode %d", ErrCorruptEvent, ev.ProtocolType, ev.Mode)
		}
	case EventGroupMembers:
		if len(ev.Offsets) > 0 || !ev.Time.IsZero() {
			return fmt.Errorf("%w: offsets in a membership record", ErrCorruptEvent)
		}
		return ev.validateMembers()
	case EventConsumerMembers:
		if len(ev.Offsets) > 0 || !ev.Time.IsZero() || ev.ProtocolType != "" || ev.Mode != 0 {
			return fmt.Errorf("%w: offsets or protocol in a consumer record", ErrCorruptEvent)
		}
		_, err := decodeConsumer(ev.Consumer.raw)
		return err
	case EventOffsetsCommitted, EventOffsetsDeleted:
		for _, o := range ev.Offsets {
			if o.Topic == "" || o.Partition < 0 || o.Offset < MinCommitOffset {
				return fmt.Errorf("%w: bad offset %s/%d@%d", ErrCorruptEvent, o.Topic, o.Partition, o.Offset)
			}
		}
	default:
		return fmt.Errorf("%w: unknown type %d", ErrCorruptEvent, ev.Type)
	}
	return nil
}

// eventVersion is the first byte of every encoded event, so the format can
// change without guessing. eventVersionSigned is the same encoding with
// signed (varint) offsets, written only for an event that holds a negative
// one (see the package doc).
const (
	eventVersion       = 1
	eventVersionSigned = 2
)

// MinCommitOffset is the lowest offset a commit may carry: Kafka's -2
// ("earliest"); -1 is "latest", or "no offset" to a Java client. Both are
// stored as sent and resolved by the reader, as Kafka does.
const MinCommitOffset = -2

// signed reports whether an event needs the signed-offset encoding.
func (ev Event) signed() bool {
	for _, o := range ev.Offsets {
		if o.Offset < 0 {
			return true
		}
	}
	return false
}

// MarshalBinary encodes ev as drawn in the package doc.
func (ev Event) MarshalBinary() ([]byte, error) {
	if err := ev.validate(); err != nil {
		return nil, err
	}
	version := byte(eventVersion)
	if ev.signed() {
		version = eventVersionSigned
	}
	b := []byte{version, byte(ev.Type)}
	b = appendString(b, ev.Group)
	switch ev.Type {
	case EventGroupDeleted:
		return b, nil
	case EventGroupProtocol:
		return append(appendString(b, ev.ProtocolType), byte(ev.Mode)), nil
	case EventGroupMembers:
		return appendMembers(append(appendString(b, ev.ProtocolType), byte(ev.Mode)), ev.Members), nil
	case EventConsumerMembers:
		return append(b, ev.Consumer.raw...), nil
	}
	b = binary.AppendVarint(b, ev.Time.UnixMilli())
	b = binary.AppendUvarint(b, uint64(len(ev.Offsets)))
	for _, o := range ev.Offsets {
		b = appendString(b, o.Topic)
		b = binary.AppendUvarint(b, uint64(o.Partition))
		if version == eventVersionSigned {
			b = binary.AppendVarint(b, o.Offset)
		} else {
			b = binary.AppendUvarint(b, uint64(o.Offset))
		}
		b = binary.AppendVarint(b, int64(o.LeaderEpoch))
		b = appendString(b, o.Metadata)
	}
	return b, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}
