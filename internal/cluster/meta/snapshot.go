package meta

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/wire"
)

// snapVersion is a snapshot of the catalog alone; snapVersionPending is the same followed
// by the group-offsets payloads applied before the broker's hook was set (groupoffsets.go),
// which only the snapshot then holds. Versions 3 and 4 are 1 and 2 with the queues after
// the topics: what Snapshot writes now; 1 and 2 (no queues) still restore.
const (
	snapVersion              = 1
	snapVersionPending       = 2
	snapVersionQueues        = 3
	snapVersionQueuesPending = 4
	// 5 and 6 are 3 and 4 with the membership section after the queues (membership.go).
	snapVersionMembers        = 5
	snapVersionMembersPending = 6
	// 7 and 8 are 5 and 6 with the group configs after the membership (groupconfig.go),
	// written only while some group has a config.
	snapVersionConfigs        = 7
	snapVersionConfigsPending = 8
	// 9 and 10 are 7 and 8 with the transactions after the group configs (txns.go; the
	// group configs section is then always written, empty or not), written only while some
	// transactional id has a record.
	snapVersionTxns        = 9
	snapVersionTxnsPending = 10
	// 11 and 12 are 9 and 10 with the pinned groups and the reassignments' original
	// replicas after the transactions (reassign.go; both sections before them then always
	// written), only while some group is pinned or being reassigned.
	snapVersionPins        = 11
	snapVersionPinsPending = 12
	// 13 and 14 are 11 and 12 with the feature level after the reassignments' originals
	// (features.go; every section before it then written), only once the level was raised:
	// a catalog at LevelBase is read by binaries from before levels existed.
	snapVersionLevel        = 13
	snapVersionLevelPending = 14
	// 15 (snapVersionGroupState, groupstate.go) is 13 with the whole group state after the
	// level, which a node restoring it takes in place of its own; it has no pending twin.
)

// Snapshot encodes the whole catalog (it is small: nodes and topics, no data).
//
//	version(1)=1 index(uvarint) nextGroup(uvarint)
//	nnodes(uvarint) {id(uvarint) kafka(bytes) http(bytes) sqs(bytes)}...        by id
//	ntopics(uvarint) {name(bytes) id(16) version(uvarint) settings(bytes)
//	                  nparts(uvarint) {group(uvarint) nreps(uvarint) {node(uvarint)}...}...}...  by name
//
//	(versions 3 to 6) nqueues(uvarint) {name(bytes) settings(bytes) group(uvarint)
//	                  created(uvarint) version(uvarint) nreps(uvarint) {node(uvarint)}...}...  by name
//
//	(versions 5 to 8) njoined(uvarint) {id(uvarint) addr(bytes)}... nremoved(uvarint) {id(uvarint)}...
//	                  nmoved(uvarint) {group(uvarint) nold(uvarint) {node(uvarint)}...}...  by id
//
//	(versions 7 to 10) ngroups(uvarint) {name(bytes) settings(bytes)}...  by name
//
//	(versions 9 to 12) ntxns(uvarint) {id(bytes) index(uvarint) record(bytes)}...  by id
//
//	(versions 11 to 14) npinned(uvarint) {group(uvarint)}...  by id
//	                    noriginal(uvarint) {group(uvarint) nreps(uvarint) {node(uvarint)}...}...  by id
//
//	(versions 13 to 15) level(uvarint), from LevelReceiptKey key(bytes: empty or 32)
//
//	(version 15) the complete group state (groupstate.go)
//
// Version 2 (4, 6, 8, 10, 12, 14) is the same as 1 (3, 5, 7, 9, 11, 13) followed by the group-offsets payloads not yet handed
// to a hook (appendPending): a snapshot taken while the broker was still opening.
func (m *Machine) Snapshot() ([]byte, error) {
	pending, gs, complete, err := m.checkpoint()
	if err != nil {
		return nil, err
	}
	b := m.State().encode()
	if complete { // groupstate.go: the catalog is at LevelGroupState, so b is version 13
		b[0] = snapVersionGroupState
		return appendGroupState(b, gs), nil
	}
	if len(pending) > 0 {
		b[0]++ // the version's pending twin: 5 to 6, 7 to 8
		b = appendPending(b, pending)
	}
	return b, nil
}

func (s *State) encode() []byte {
	version := byte(snapVersionMembers)
	pinned, originals := s.pinnedGroups(), s.reassigning()
	switch {
	case s.Level > LevelBase:
		version = snapVersionLevel
	case len(pinned) > 0 || len(originals) > 0:
		version = snapVersionPins
	case len(s.Txns) > 0:
		version = snapVersionTxns
	case len(s.GroupConfigs) > 0:
		version = snapVersionConfigs
	}
	b := []byte{version}
	b = binary.AppendUvarint(b, s.Index)
	b = binary.AppendUvarint(b, uint64(s.NextGroup))
	b = binary.AppendUvarint(b, uint64(len(s.Nodes)))
	for _, n := range s.Nodes {
		b = binary.AppendUvarint(b, uint64(n.ID))
		b = appendString(b, n.KafkaAddr)
		b = appendString(b, n.HTTPAddr)
		b = appendString(b, n.SQSAddr)
	}
	names := s.TopicNames()
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, name := range names {
		t := s.Topics[name]
		b = appendString(b, name)
		b = append(b, t.ID[:]...)
		b = binary.AppendUvarint(b, t.Version)
		b = appendBytes(b, t.Settings)
		b = binary.AppendUvarint(b, uint64(len(t.Partitions)))
		for _, p := range t.Partitions {
			b = binary.AppendUvarint(b, uint64(p.Group))
			b = binary.AppendUvarint(b, uint64(len(p.Replicas)))
			for _, r := range p.Replicas {
				b = binary.AppendUvarint(b, uint64(r))
			}
		}
	}
	qnames := s.QueueNames()
	b = binary.AppendUvarint(b, uint64(len(qnames)))
	for _, name := range qnames {
		q := s.Queues[name]
		b = appendString(b, name)
		b = appendBytes(b, q.Settings)
		b = binary.AppendUvarint(b, uint64(q.Group))
		b = binary.AppendUvarint(b, q.Created)
		b = binary.AppendUvarint(b, q.Version)
		b = binary.AppendUvarint(b, uint64(len(q.Replicas)))
		for _, r := range q.Replicas {
			b = binary.AppendUvarint(b, uint64(r))
		}
	}
	b = s.encodeMembership(b)
	if version >= snapVersionConfigs {
		b = s.encodeGroupConfigs(b)
	}
	if version >= snapVersionTxns {
		b = s.encodeTxns(b)
	}
	if version >= snapVersionPins {
		b = appendGroups(b, pinned)
		b = binary.AppendUvarint(b, uint64(len(originals)))
		for _, g := range originals {
			b = binary.AppendUvarint(b, uint64(g.Group))
			b = appendNodes(b, g.Original)
		}
	}
	if version >= snapVersionLevel {
		b = binary.AppendUvarint(b, uint64(s.Level))
		if s.Level >= LevelReceiptKey {
			b = appendBytes(b, s.ReceiptKey)
		}
	}
	return b
}

// Restore replaces the catalog by a snapshot's (nil: the empty catalog). Results kept for
// proposers are dropped: multiraft fails the proposals a snapshot overtook with
// ErrOutcomeUnknown.
func (m *Machine) Restore(data []byte) error {
	s := emptyState()
	var pending []groupOffsets
	var gs *groupState
	if len(data) > 0 {
		var err error
		if s, pending, gs, err = decodeState(data); err != nil {
			return fmt.Errorf("meta: snapshot: %w", err)
		}
	}
	m.mu.Lock()
	m.results = map[uint64]Result{}
	m.mu.Unlock()
	m.lastApplied = s.Index
	if len(pending) > 0 {
		m.lastApplied = max(m.lastApplied, pending[len(pending)-1].index)
	}
	if gs != nil {
		m.lastApplied = max(m.lastApplied, gs.index)
	}
	m.publish(s)
	if gs != nil {
		return m.restoreGroupState(*gs) // groupstate.go
	}
	return m.restorePending(pending)
}

// decodeState parses a snapshot and checks what apply guarantees: nodes sorted and unique,
// legal unique topic names, group ids below NextGroup and unique, replicas registered.
func decodeState(data []byte) (*State, []groupOffsets, *groupState, error) {
	version := data[0]
	if version < snapVersion || version > snapVersionGroupState {
		return nil, nil, nil, fmt.Errorf("version %d", data[0])
	}
	d := decoder{wire.Decoder{B: data[1:], Bad: ErrBadCommand}}
	s := emptyState()
	s.Index = d.Uvarint()
	s.CatalogChanged = s.Index // not in the snapshot: at most one round more for a watcher
	s.NextGroup = multiraft.GroupID(d.Uvarint())
	if d.Err == nil && s.NextGroup < FirstDataGroup {
		d.Fail("next group %d", s.NextGroup)
	}
	nn := d.count()
	for i := uint64(0); i < nn && d.Err == nil; i++ {
		n := Node{ID: multiraft.NodeID(d.Uvarint()), KafkaAddr: string(d.Bytes(MaxAddr)),
			HTTPAddr: string(d.Bytes(MaxAddr)), SQSAddr: string(d.Bytes(MaxAddr))}
		if d.Err == nil && (n.ID == 0 || len(s.Nodes) > 0 && s.Nodes[len(s.Nodes)-1].ID >= n.ID) {
			d.Fail("node %d out of order", n.ID)
		}
		s.Nodes = append(s.Nodes, n)
	}
	groups := map[multiraft.GroupID]bool{}
	nt := d.count()
	for i := uint64(0); i < nt && d.Err == nil; i++ {
		t := d.topic(s, groups)
		if d.Err == nil {
			s.Topics[t.Name] = t
		}
	}
	if version >= snapVersionQueues {
		nq := d.count()
		for i := uint64(0); i < nq && d.Err == nil; i++ {
			q := d.queue(s, groups)
			if d.Err == nil {
				s.Queues[q.Name] = q
			}
		}
	}
	if version >= snapVersionMembers {
		d.membership(s)
	}
	if version >= snapVersionConfigs {
		d.groupConfigs(s)
	}
	if version >= snapVersionTxns {
		d.txns(s)
	}
	if version >= snapVersionPins {
		d.pins(s)
	}
	if version >= snapVersionLevel {
		d.level(s)
		s.ReceiptKey = d.receiptKey(s.Level)
	}
	var pending []groupOffsets
	if d.Err == nil && version%2 == 0 { // every pending twin is even (snapVersionPending, ...)
		pending = d.pending()
	}
	var gs *groupState
	if d.Err == nil && version == snapVersionGroupState {
		st := d.groupState(s)
		gs = &st
	}
	d.Done()
	if d.Err != nil {
		return nil, nil, nil, d.Err
	}
	return s, pending, gs, nil
}

// count reads a count of items of at least one byte each: never more than the bytes left.
func (d *decoder) count() uint64 {
	n := d.Uvarint()
	if d.Err == nil && n > uint64(len(d.B)) {
		d.Fail("%d items in %d bytes", n, len(d.B))
		return 0
	}
	return n
}

func (d *decoder) topic(s *State, groups map[multiraft.GroupID]bool) *Topic {
	t := &Topic{Name: string(d.Bytes(MaxTopicName))}
	if d.Err == nil && (!ValidTopicName(t.Name) || s.Topics[t.Name] != nil) {
		d.Fail("topic name %q", t.Name)
	}
	if d.Err == nil && len(d.B) < len(t.ID) {
		d.Fail("short topic id")
	}
	if d.Err != nil {
		return nil
	}
	copy(t.ID[:], d.B)
	d.B = d.B[len(t.ID):]
	t.Version = d.Uvarint()
	if set := d.Bytes(MaxSettings); len(set) > 0 {
		t.Settings = bytes.Clone(set)
	}
	np := d.count()
	if d.Err == nil && (np == 0 || np > MaxPartitions) {
		d.Fail("topic %q: %d partitions", t.Name, np)
	}
	for p := uint64(0); p < np && d.Err == nil; p++ {
		part := Partition{Group: multiraft.GroupID(d.Uvarint())}
		if d.Err == nil && (part.Group < FirstDataGroup || part.Group >= s.NextGroup || groups[part.Group]) {
			d.Fail("topic %q: group %d", t.Name, part.Group)
		}
		groups[part.Group] = true
		nr := d.count()
		if d.Err == nil && (nr == 0 || nr > uint64(len(s.Nodes))) {
			d.Fail("topic %q: %d replicas", t.Name, nr)
		}
		for r := uint64(0); r < nr && d.Err == nil; r++ {
			id := multiraft.NodeID(d.Uvarint())
			if _, ok := s.Node(id); d.Err == nil && !ok {
				d.Fail("topic %q: replica %d not registered", t.Name, id)
			}
			part.Replicas = append(part.Replicas, id)
		}
		t.Partitions = append(t.Partitions, part)
	}
	return t
}

func (d *decoder) queue(s *State, groups map[multiraft.GroupID]bool) *Queue {
	q := &Queue{Name: string(d.Bytes(MaxQueueName))}
	if d.Err == nil && (!ValidQueueName(q.Name) || s.Queues[q.Name] != nil) {
		d.Fail("queue name %q", q.Name)
	}
	if set := d.Bytes(MaxSettings); len(set) > 0 {
		q.Settings = bytes.Clone(set)
	}
	q.Group = multiraft.GroupID(d.Uvarint())
	if d.Err == nil && (q.Group < FirstDataGroup || q.Group >= s.NextGroup || groups[q.Group]) {
		d.Fail("queue %q: group %d", q.Name, q.Group)
	}
	groups[q.Group] = true
	q.Created = d.Uvarint()
	q.Version = d.Uvarint()
	if d.Err == nil && q.Version < q.Created {
		d.Fail("queue %q: version %d before its creation %d", q.Name, q.Version, q.Created)
	}
	nr := d.count()
	if d.Err == nil && (nr == 0 || nr > uint64(len(s.Nodes))) {
		d.Fail("queue %q: %d replicas", q.Name, nr)
	}
	for r := uint64(0); r < nr && d.Err == nil; r++ {
		id := multiraft.NodeID(d.Uvarint())
		if _, ok := s.Node(id); d.Err == nil && !ok {
			d.Fail("queue %q: replica %d not registered", q.Name, id)
		}
		q.Replicas = append(q.Replicas, id)
	}
	if d.Err != nil {
		return nil
	}
	return q
}
