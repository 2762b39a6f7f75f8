package group

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"regexp"
	"slices"
	"time"
)

// Durable membership of KIP-848 consumer groups (Config.DurableMembership).
//
// A consumer group's state — group epoch, target assignment epoch and
// assignor, and every member with its epochs, subscription, partitions
// held (each with the epoch it was given in), partitions being revoked and
// target — is returned as EventConsumerMembers records whenever a call
// changed it: the group's fields and the members that changed or left
// since the last record, so a reconciliation step of one member writes
// that member, not the group (a group of n members converging after a
// join writes O(n) members, not O(n²); BenchmarkConsumerRecordBytes).
// Heartbeats that change nothing write nothing. The broker answers a
// heartbeat only once its record is durable, so a member never holds what
// a replayed coordinator does not know. Session and revocation clocks are
// not recorded: Resume restarts them.

// ConsumerMembership is an EventConsumerMembers record's body, kept
// encoded (see appendConsumerRecord) since only this package reads it.
type ConsumerMembership struct {
	raw []byte
}

// consumerRecorded is what a group's records hold so far: the group's
// fields and each member's encoding. noteConsumer compares against it.
type consumerRecorded struct {
	header  []byte
	members map[string][]byte
}

// consumerState encodes cg as a record would hold it.
func consumerState(cg *consumerGroup) consumerRecorded {
	st := consumerRecorded{header: appendConsumerHeader(nil, cg), members: make(map[string][]byte, len(cg.members))}
	for id, m := range cg.members {
		st.members[id] = appendConsumerMember(nil, m, cg.target[id])
	}
	return st
}

// noteConsumer appends g's consumer record to out if anything recorded
// changed: the group's fields, and the members added, changed or gone.
// The group's first record (or one after it was rebuilt) lists everyone.
func (c *Coordinator) noteConsumer(g *group, out *Output) {
	now := consumerState(g.cg)
	last := g.recordedCG
	if last == nil && len(g.cg.members) == 0 {
		return
	}
	rec := consumerRecord{full: last == nil, header: now.header}
	for _, m := range g.cg.sortedMembers() {
		if enc := now.members[m.id]; last == nil || !bytes.Equal(enc, last.members[m.id]) {
			rec.members = append(rec.members, enc)
		}
	}
	if last != nil {
		for _, id := range sortedKeys(last.members) {
			if _, ok := now.members[id]; !ok {
				rec.removed = append(rec.removed, id)
			}
		}
		if bytes.Equal(now.header, last.header) && len(rec.members) == 0 && len(rec.removed) == 0 {
			return
		}
	}
	g.recordedCG = &now
	out.Events = append(out.Events, Event{Type: EventConsumerMembers, Group: g.id, Consumer: &ConsumerMembership{raw: rec.append(nil)}})
}

// fullConsumerEvent is the record of cg as a whole (Snapshot).
func fullConsumerEvent(id string, cg *consumerGroup) Event {
	rec := consumerRecord{full: true, header: appendConsumerHeader(nil, cg)}
	for _, m := range cg.sortedMembers() {
		rec.members = append(rec.members, appendConsumerMember(nil, m, cg.target[m.id]))
	}
	return Event{Type: EventConsumerMembers, Group: id, Consumer: &ConsumerMembership{raw: rec.append(nil)}}
}

// consumerRecord is a record's parts, each already encoded:
//
//	header | full byte (0 or 1) | removed count uvarint | {member id string}... (sorted) |
//	member count uvarint | member...
//
// where header is
//
//	group epoch varint | assignment epoch varint | assignor string
//
// and each member (those added or changed, in join order; every member
// when full, which replaces the group rather than amending it):
//
//	id | instance id | rack id | client id | client host (strings) |
//	epoch varint | previous epoch varint | state byte (0-2) |
//	held count uvarint | {topic string, partition uvarint, since epoch varint}... (sorted) |
//	revoking count uvarint | {topic string, partition uvarint}... (sorted) |
//	topic count uvarint | {topic string}... | regex string | assignor string |
//	rebalance timeout ms uvarint |
//	target count uvarint | {topic string, partition uvarint}... (sorted)
type consumerRecord struct {
	header  []byte
	full    bool
	removed []string
	members [][]byte
}

func (r consumerRecord) append(b []byte) []byte {
	b = append(b, r.header...)
	full := byte(0)
	if r.full {
		full = 1
	}
	b = append(b, full)
	b = binary.AppendUvarint(b, uint64(len(r.removed)))
	for _, id := range r.removed {
		b = appendString(b, id)
	}
	b = binary.AppendUvarint(b, uint64(len(r.members)))
	for _, m := range r.members {
		b = append(b, m...)
	}
	return b
}

func appendConsumerHeader(b []byte, cg *consumerGroup) []byte {
	b = binary.AppendVarint(b, int64(cg.epoch))
	b = binary.AppendVarint(b, int64(cg.assignmentEpoch))
	return appendString(b, cg.assignor)
}

func appendConsumerMember(b []byte, m *cmember, target tpSet) []byte {
	for _, s := range []string{m.id, m.instanceID, m.rackID, m.clientID, m.clientHost} {
		b = appendString(b, s)
	}
	b = binary.AppendVarint(b, int64(m.epoch))
	b = binary.AppendVarint(b, int64(m.prevEpoch))
	b = append(b, byte(m.state))
	held := sortedTPs(tpKeys(m.assigned))
	b = binary.AppendUvarint(b, uint64(len(held)))
	for _, tp := range held {
		b = appendTP(b, tp)
		b = binary.AppendVarint(b, int64(m.assigned[tp]))
	}
	b = appendTPs(b, m.revoking)
	b = binary.AppendUvarint(b, uint64(len(m.topics)))
	for _, t := range m.topics {
		b = appendString(b, t)
	}
	b = appendString(b, m.regex)
	b = appendString(b, m.assignor)
	b = binary.AppendUvarint(b, uint64(m.rebalanceTimeout.Milliseconds()))
	return appendTPs(b, target)
}

func tpKeys[V any](m map[topicPartition]V) tpSet {
	s := make(tpSet, len(m))
	for tp := range m {
		s[tp] = true
	}
	return s
}

func appendTP(b []byte, tp topicPartition) []byte {
	return binary.AppendUvarint(appendString(b, tp.topic), uint64(tp.partition))
}

func appendTPs(b []byte, s tpSet) []byte {
	tps := sortedTPs(s)
	b = binary.AppendUvarint(b, uint64(len(tps)))
	for _, tp := range tps {
		b = appendTP(b, tp)
	}
	return b
}

func (d *decoder) tp() topicPartition {
	return topicPartition{d.string("topic"), int32(d.uvarint(math.MaxInt32, "partition"))}
}

// tps reads a sorted set of partitions; anything unsorted or repeated is
// corrupt (one encoding per state).
func (d *decoder) tps(what string) tpSet {
	n := d.count(what)
	s := tpSet{}
	var prev topicPartition
	for i := 0; i < n && d.err == nil; i++ {
		tp := d.tp()
		if i > 0 && cmpTP(prev, tp) >= 0 {
			d.fail(what + ": not sorted")
		}
		s[tp], prev = true, tp
	}
	return s
}

// parsedConsumer is a decoded record.
type parsedConsumer struct {
	epoch, assignmentEpoch int32
	assignor               string
	full                   bool
	removed                []string
	members                []*cmember
	targets                []tpSet
}

// decodeConsumer parses a record body; anything that is not one record in
// its one encoding is ErrCorruptEvent. Whether it fits the group it
// amends is applyConsumer's to check.
func decodeConsumer(raw []byte) (*parsedConsumer, error) {
	d := &decoder{b: raw}
	p := &parsedConsumer{}
	p.epoch = int32(d.varint(0, math.MaxInt32, "group epoch"))
	p.assignmentEpoch = int32(d.varint(0, math.MaxInt32, "assignment epoch"))
	p.assignor = d.string("assignor")
	switch d.byte() {
	case 0:
	case 1:
		p.full = true
	default:
		d.fail("full flag")
	}
	nr := d.count("removed count")
	for i := 0; i < nr && d.err == nil; i++ {
		id := d.string("removed member")
		if i > 0 && id <= p.removed[i-1] {
			d.fail("removed members not sorted")
		}
		p.removed = append(p.removed, id)
	}
	if p.full && nr > 0 {
		d.fail("removed members in a full record")
	}
	n := d.count("member count")
	seen := map[string]bool{}
	for i := 0; i < n && d.err == nil; i++ {
		m, target := d.consumerMember()
		if d.err != nil {
			break
		}
		if m.id == "" || seen[m.id] || slices.Contains(p.removed, m.id) || m.state > memberUnreleased {
			return nil, fmt.Errorf("%w: consumer record: member %q empty, repeated, removed too, or in state %d", ErrCorruptEvent, m.id, m.state)
		}
		seen[m.id] = true
		p.members, p.targets = append(p.members, m), append(p.targets, target)
	}
	if d.err == nil {
		// The members listed must fit together (the rest of the group is
		// applyConsumer's to check): so a record applies to a group that
		// has none of the others.
		holder, instances := map[topicPartition]bool{}, map[string]bool{}
		for _, m := range p.members {
			if m.instanceID != "" && instances[m.instanceID] {
				d.fail("instance id repeated")
			}
			instances[m.instanceID] = true
			for _, ps := range []tpSet{tpKeys(m.assigned), m.revoking} {
				for tp := range ps {
					if holder[tp] {
						d.fail("a partition held twice")
					}
					holder[tp] = true
				}
			}
		}
	}
	if d.err != nil {
		return nil, d.err
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w: consumer record: %d trailing bytes", ErrCorruptEvent, len(d.b))
	}
	if !bytes.Equal(p.encode(), raw) {
		return nil, fmt.Errorf("%w: consumer record: not in its one encoding", ErrCorruptEvent)
	}
	return p, nil
}

func (p *parsedConsumer) encode() []byte {
	cg := &consumerGroup{epoch: p.epoch, assignmentEpoch: p.assignmentEpoch, assignor: p.assignor}
	rec := consumerRecord{header: appendConsumerHeader(nil, cg), full: p.full, removed: p.removed}
	for i, m := range p.members {
		rec.members = append(rec.members, appendConsumerMember(nil, m, p.targets[i]))
	}
	return rec.append(nil)
}

func (d *decoder) consumerMember() (*cmember, tpSet) {
	m := &cmember{assigned: map[topicPartition]int32{}}
	m.id, m.instanceID, m.rackID = d.string("member id"), d.string("instance id"), d.string("rack id")
	m.clientID, m.clientHost = d.string("client id"), d.string("client host")
	m.epoch = int32(d.varint(int64(StaticLeaveEpoch), math.MaxInt32, "member epoch"))
	m.prevEpoch = int32(d.varint(int64(StaticLeaveEpoch), math.MaxInt32, "previous epoch"))
	m.state = memberState(d.byte())
	held := d.count("held count")
	var prev topicPartition
	for j := 0; j < held && d.err == nil; j++ {
		tp := d.tp()
		if j > 0 && cmpTP(prev, tp) >= 0 {
			d.fail("held not sorted")
		}
		m.assigned[tp], prev = int32(d.varint(math.MinInt32, math.MaxInt32, "held since")), tp
	}
	if m.revoking = d.tps("revoking"); len(m.revoking) == 0 {
		m.revoking = nil
	}
	nt := d.count("topic count")
	for j := 0; j < nt && d.err == nil; j++ {
		m.topics = append(m.topics, d.string("topic"))
	}
	m.regex, m.assignor = d.string("regex"), d.string("member assignor")
	m.rebalanceTimeout = time.Duration(d.uvarint(maxTimeoutMs, "rebalance timeout")) * time.Millisecond
	target := d.tps("target")
	if d.err == nil && m.regex != "" {
		re, err := regexp.Compile("^(?:" + m.regex + ")$")
		if err != nil {
			d.fail("regex")
		}
		m.re = re
	}
	return m, target
}

// applyConsumer applies a record to g's consumer group: a full record
// replaces it, another amends it (members removed, then added or
// replaced). The result must give every partition one holder; a record
// that would not is refused and changes nothing.
func (c *Coordinator) applyConsumer(ev Event) error {
	p, err := decodeConsumer(ev.Consumer.raw)
	if err != nil {
		return err
	}
	g := c.getOrCreate(ev.Group)
	cg := newConsumerGroup()
	if old := g.cg; old != nil && !p.full {
		cg.seq = old.seq
		for id, m := range old.members {
			cg.members[id], cg.target[id] = m, old.target[id]
		}
	}
	for _, id := range p.removed {
		delete(cg.members, id)
		delete(cg.target, id)
	}
	for i, m := range p.members {
		if old := cg.members[m.id]; old != nil {
			m.seq, m.lastSeen, m.revokeDeadline = old.seq, old.lastSeen, old.revokeDeadline
		} else {
			cg.seq++
			m.seq = cg.seq
		}
		cg.members[m.id], cg.target[m.id] = m, p.targets[i]
	}
	cg.epoch, cg.assignmentEpoch, cg.assignor = p.epoch, p.assignmentEpoch, p.assignor
	for _, m := range cg.members {
		if m.instanceID != "" {
			if o := cg.static[m.instanceID]; o != "" {
				return fmt.Errorf("%w: consumer record: instance %q held by %s and %s", ErrCorruptEvent, m.instanceID, o, m.id)
			}
			cg.static[m.instanceID] = m.id
		}
		for _, ps := range []tpSet{tpKeys(m.assigned), m.revoking} {
			for tp := range ps {
				if o, dup := cg.owner[tp]; dup {
					return fmt.Errorf("%w: consumer record: %s/%d held by %s and %s", ErrCorruptEvent, tp.topic, tp.partition, o, m.id)
				}
				cg.owner[tp] = m.id
			}
		}
	}
	g.members, g.static, g.state, g.storing = map[string]*member{}, map[string]string{}, Empty, false
	g.protocolType, g.mode = TypeConsumer, ConsumerProtocol
	g.cg = cg
	st := consumerState(cg)
	g.recordedCG = &st
	return nil
}

// resumeConsumer starts a restored consumer group's clocks: a session
// from now for every member, a rebalance timeout for each revocation.
func resumeConsumer(cg *consumerGroup, now time.Time) {
	for _, m := range cg.members {
		if m.lastSeen.IsZero() {
			m.lastSeen = now
		}
		if m.state == memberUnrevoked && m.revokeDeadline.IsZero() {
			m.revokeDeadline = now.Add(m.rebalanceTimeout)
		}
	}
}
