package meta

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/wire"
)

// Op is a command's kind.
type Op byte

const (
	OpRegisterNode  Op = 1
	OpCreateTopic   Op = 2
	OpDeleteTopic   Op = 3
	OpAddPartitions Op = 4
	OpUpdateTopic   Op = 5
	// OpGroupOffsets carries consumer-group offset changes: bytes this package never
	// interprets, handed to the broker's GroupOffsets hook on every node (groupoffsets.go).
	OpGroupOffsets Op = 6
	OpCreateQueue  Op = 7
	OpDeleteQueue  Op = 8
	OpUpdateQueue  Op = 9
)

// commandVersion is an entry's first byte: a replica that meets a version it does not know
// stops the group rather than guess (an older binary behind a newer leader).
const commandVersion = 1

// Limits of a decoded command: the decoder allocates nothing past them on any input.
const (
	MaxAddr         = 1 << 10 // a node address
	MaxSettings     = 1 << 20 // a topic's settings
	MaxPartitions   = 10000   // partitions of one topic
	MaxGroupOffsets = 8 << 20 // a group-offsets payload
)

// ErrBadCommand: an entry that is not one well-formed command. The state machine stops on
// it rather than skip it (a replica that skipped an entry would diverge).
var ErrBadCommand = errors.New("meta: malformed command")

// Command is one entry of the metadata group. Origin and Request name the proposal so the
// proposing node can find its result.
type Command struct {
	Op      Op
	Origin  uint64 // the proposing node
	Request uint64 // unique per Origin

	Node       Node   // RegisterNode
	Name       string // the topic's or queue's: Create, Delete, AddPartitions, Update
	Partitions int32  // Create: the count; AddPartitions: the new total
	RF         int32  // CreateTopic, CreateQueue: the replication factor (<= 0: the default)
	Settings   []byte // Create, Update (empty: none)
	Payload    []byte // GroupOffsets: opaque to meta (empty: a barrier, see Catalog.GroupOffsetsBarrier); SetTxn: the record; SetFeatureLevel: the receipt key
	Term       uint64 // SetTxn: the term of the coordinator that proposed it
	Level      int    // SetFeatureLevel (features.go)

	Addr     string             // AddNode: the node's Raft transport address
	Group    multiraft.GroupID  // MoveReplica, MoveDone
	From, To multiraft.NodeID   // MoveReplica
	Replicas []multiraft.NodeID // MoveDone: the replica set reached
}

// Encode appends c's encoding to b.
//
//	version(1)=1 op(1) origin(uvarint) request(uvarint), then by op:
//	1 RegisterNode   id(uvarint) kafka(bytes) http(bytes) sqs(bytes)
//	2 CreateTopic    name(bytes) partitions(varint) rf(varint) settings(bytes)
//	3 DeleteTopic    name(bytes)
//	4 AddPartitions  name(bytes) total(varint)
//	5 UpdateTopic    name(bytes) settings(bytes)
//	6 GroupOffsets   payload(bytes)
//	7 CreateQueue    name(bytes) rf(varint) settings(bytes)
//	8 DeleteQueue    name(bytes)
//	9 UpdateQueue    name(bytes) settings(bytes)
//	10 AddNode       id(uvarint) addr(bytes)
//	11 RemoveNode    id(uvarint)
//	12 MoveReplica   group(uvarint) from(uvarint) to(uvarint)
//	13 MoveDone      group(uvarint) n(uvarint) {node(uvarint)}...
//	14 SetGroupConfig name(bytes) settings(bytes)  (groupconfig.go)
//	15 SetTxn        name(bytes) term(uvarint) record(bytes)  (txns.go)
//	16 Reassign, 17 CancelReassign  (reassign.go)
//	18 SetFeatureLevel level(uvarint), from LevelReceiptKey key(bytes: empty or 32)  (features.go)
//
// bytes is a uvarint length then the bytes. Nothing may follow the last field.
func (c *Command) Encode(b []byte) []byte {
	b = append(b, commandVersion, byte(c.Op))
	b = binary.AppendUvarint(b, c.Origin)
	b = binary.AppendUvarint(b, c.Request)
	switch c.Op {
	case OpRegisterNode:
		b = binary.AppendUvarint(b, uint64(c.Node.ID))
		b = appendString(b, c.Node.KafkaAddr)
		b = appendString(b, c.Node.HTTPAddr)
		b = appendString(b, c.Node.SQSAddr)
	case OpCreateTopic:
		b = appendString(b, c.Name)
		b = binary.AppendVarint(b, int64(c.Partitions))
		b = binary.AppendVarint(b, int64(c.RF))
		b = appendBytes(b, c.Settings)
	case OpDeleteTopic:
		b = appendString(b, c.Name)
	case OpAddPartitions:
		b = appendString(b, c.Name)
		b = binary.AppendVarint(b, int64(c.Partitions))
	case OpUpdateTopic, OpUpdateQueue:
		b = appendString(b, c.Name)
		b = appendBytes(b, c.Settings)
	case OpGroupOffsets:
		b = appendBytes(b, c.Payload)
	case OpCreateQueue:
		b = appendString(b, c.Name)
		b = binary.AppendVarint(b, int64(c.RF))
		b = appendBytes(b, c.Settings)
	case OpDeleteQueue:
		b = appendString(b, c.Name)
	case OpAddNode, OpRemoveNode, OpMoveReplica, OpMoveDone, OpReassign, OpCancelReassign:
		b = c.encodeMembership(b)
	case OpSetGroupConfig:
		b = appendString(b, c.Name)
		b = appendBytes(b, c.Settings)
	case OpSetTxn:
		b = appendString(b, c.Name)
		b = binary.AppendUvarint(b, c.Term)
		b = appendBytes(b, c.Payload)
	case OpSetFeatureLevel:
		b = binary.AppendUvarint(b, uint64(c.Level))
		if c.Level >= LevelReceiptKey {
			b = appendBytes(b, c.Payload)
		}
	}
	return b
}

func appendBytes(b, v []byte) []byte { return append(binary.AppendUvarint(b, uint64(len(v))), v...) }

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// Decode parses one command. Any malformed input, trailing bytes included, is
// ErrBadCommand. Settings alias b. A name that is no legal topic name decodes: apply
// refuses it as a result, as it does every other refusal.
func Decode(b []byte) (Command, error) {
	var c Command
	if len(b) < 2 {
		return c, fmt.Errorf("%w: %d bytes", ErrBadCommand, len(b))
	}
	if b[0] != commandVersion {
		return c, fmt.Errorf("%w: version %d", ErrBadCommand, b[0])
	}
	c.Op = Op(b[1])
	d := decoder{wire.Decoder{B: b[2:], Bad: ErrBadCommand}}
	c.Origin = d.Uvarint()
	c.Request = d.Uvarint()
	switch c.Op {
	case OpRegisterNode:
		c.Node.ID = multiraft.NodeID(d.Uvarint())
		c.Node.KafkaAddr = string(d.Bytes(MaxAddr))
		c.Node.HTTPAddr = string(d.Bytes(MaxAddr))
		c.Node.SQSAddr = string(d.Bytes(MaxAddr))
	case OpCreateTopic:
		c.Name = string(d.Bytes(MaxTopicName))
		c.Partitions = d.Int32()
		c.RF = d.Int32()
		c.Settings = d.Bytes(MaxSettings)
	case OpDeleteTopic:
		c.Name = string(d.Bytes(MaxTopicName))
	case OpAddPartitions:
		c.Name = string(d.Bytes(MaxTopicName))
		c.Partitions = d.Int32()
	case OpUpdateTopic:
		c.Name = string(d.Bytes(MaxTopicName))
		c.Settings = d.Bytes(MaxSettings)
	case OpGroupOffsets:
		c.Payload = d.Bytes(MaxGroupOffsets)
	case OpCreateQueue:
		c.Name = string(d.Bytes(MaxQueueName))
		c.RF = d.Int32()
		c.Settings = d.Bytes(MaxSettings)
	case OpDeleteQueue:
		c.Name = string(d.Bytes(MaxQueueName))
	case OpUpdateQueue:
		c.Name = string(d.Bytes(MaxQueueName))
		c.Settings = d.Bytes(MaxSettings)
	case OpAddNode, OpRemoveNode, OpMoveReplica, OpMoveDone, OpReassign, OpCancelReassign:
		c.decodeMembership(&d)
	case OpSetGroupConfig:
		c.Name = string(d.Bytes(MaxGroupName))
		c.Settings = d.Bytes(MaxGroupConfig)
	case OpSetTxn:
		c.Name = string(d.Bytes(MaxTxnID))
		c.Term = d.Uvarint()
		c.Payload = d.Bytes(MaxTxnRecord)
	case OpSetFeatureLevel:
		if l := d.Uvarint(); l <= maxLevelEncoded {
			c.Level = int(l)
		} else {
			d.Fail("feature level %d", l)
		}
		c.Payload = d.receiptKey(c.Level)
	default:
		return c, fmt.Errorf("%w: unknown op %d", ErrBadCommand, c.Op)
	}
	if len(c.Settings) == 0 {
		c.Settings = nil
	}
	if len(c.Payload) == 0 {
		c.Payload = nil
	}
	d.Done()
	return c, d.Err
}

// decoder is wire.Decoder with the catalog's own readers (snapshot.go, groupoffsets.go).
type decoder struct{ wire.Decoder }
