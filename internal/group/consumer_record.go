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
// A consumer group's state — group epoch, target assignment and its
// epoch and assignor, and every member with its epochs, subscription,
// partitions held (each with the epoch it was given in) and partitions
// being revoked — is returned as one EventConsumerMembers record whenever
// a call changed it; heartbeats that change nothing write nothing. The
// broker answers a heartbeat only once its record is durable, so a member
// never holds what a replayed coordinator does not know. Session and
// revocation clocks are not recorded: Resume restarts them.

// ConsumerMembership is an EventConsumerMembers record's body: the state
// encoded (see appendConsumer), kept as bytes since only this package
// reads it.
type ConsumerMembership struct {
	raw []byte
}

// noteConsumer appends g's consumer record to out if it changed.
func (c *Coordinator) noteConsumer(g *group, out *Output) {
	raw := appendConsumer(nil, g.cg)
	if bytes.Equal(raw, g.recordedCG) || (g.recordedCG == nil && len(g.cg.members) == 0) {
		return
	}
	g.recordedCG = raw
	out.Events = append(out.Events, Event{Type: EventConsumerMembers, Group: g.id, Consumer: &ConsumerMembership{raw: raw}})
}

// appendConsumer encodes a consumer group's recorded state:
//
//	epoch varint | assignment epoch varint | assignor string | member count uvarint | member...
//
// and each member, in join order:
//
//	id | instance id | rack id | client id | client host (strings) |
//	epoch varint | previous epoch varint | state byte (0-2) |
//	held count uvarint | {topic string, partition uvarint, since epoch varint}... (sorted) |
//	revoking count uvarint | {topic string, partition uvarint}... (sorted) |
//	topic count uvarint | {topic string}... | regex string | assignor string |
//	rebalance timeout ms uvarint |
//	target count uvarint | {topic string, partition uvarint}... (sorted)
func appendConsumer(b []byte, cg *consumerGroup) []byte {
	b = binary.AppendVarint(b, int64(cg.epoch))
	b = binary.AppendVarint(b, int64(cg.assignmentEpoch))
	b = appendString(b, cg.assignor)
	ms := cg.sortedMembers()
	b = binary.AppendUvarint(b, uint64(len(ms)))
	for _, m := range ms {
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
		b = appendTPs(b, cg.target[m.id])
	}
	return b
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

// decodeConsumer parses a record body into a consumer group (its owner
// map rebuilt from what members hold and revoke) and checks it.
func decodeConsumer(raw []byte) (*consumerGroup, error) {
	d := &decoder{b: raw}
	cg := newConsumerGroup()
	cg.epoch = int32(d.varint(0, math.MaxInt32, "group epoch"))
	cg.assignmentEpoch = int32(d.varint(0, math.MaxInt32, "assignment epoch"))
	cg.assignor = d.string("assignor")
	n := d.count("member count")
	for i := 0; i < n && d.err == nil; i++ {
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
		if d.err != nil {
			break
		}
		if cg.members[m.id] != nil || m.id == "" || m.state > memberUnreleased {
			return nil, fmt.Errorf("%w: consumer record: member %q repeated, empty or in state %d", ErrCorruptEvent, m.id, m.state)
		}
		if m.regex != "" {
			re, err := regexp.Compile("^(?:" + m.regex + ")$")
			if err != nil {
				return nil, fmt.Errorf("%w: consumer record: member %s's regex: %v", ErrCorruptEvent, m.id, err)
			}
			m.re = re
		}
		cg.seq++
		m.seq = cg.seq
		cg.members[m.id] = m
		cg.target[m.id] = target
		if m.instanceID != "" {
			if cg.static[m.instanceID] != "" {
				return nil, fmt.Errorf("%w: consumer record: instance %q repeated", ErrCorruptEvent, m.instanceID)
			}
			cg.static[m.instanceID] = m.id
		}
		for tp := range m.assigned {
			if o, dup := cg.owner[tp]; dup {
				return nil, fmt.Errorf("%w: consumer record: %s/%d held by %s and %s", ErrCorruptEvent, tp.topic, tp.partition, o, m.id)
			}
			cg.owner[tp] = m.id
		}
		for tp := range m.revoking {
			if o, dup := cg.owner[tp]; dup {
				return nil, fmt.Errorf("%w: consumer record: %s/%d held by %s and %s", ErrCorruptEvent, tp.topic, tp.partition, o, m.id)
			}
			cg.owner[tp] = m.id
		}
	}
	if d.err != nil {
		return nil, d.err
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w: consumer record: %d trailing bytes", ErrCorruptEvent, len(d.b))
	}
	if !bytes.Equal(appendConsumer(nil, cg), raw) {
		return nil, fmt.Errorf("%w: consumer record: not in its one encoding", ErrCorruptEvent)
	}
	return cg, nil
}

// applyConsumer replaces g's consumer group with a record's.
func (c *Coordinator) applyConsumer(ev Event) error {
	cg, err := decodeConsumer(ev.Consumer.raw)
	if err != nil {
		return err
	}
	g := c.getOrCreate(ev.Group)
	g.members, g.static, g.state, g.storing = map[string]*member{}, map[string]string{}, Empty, false
	g.protocolType, g.mode = TypeConsumer, ConsumerProtocol
	g.cg = cg
	g.recordedCG = slices.Clone(ev.Consumer.raw)
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
