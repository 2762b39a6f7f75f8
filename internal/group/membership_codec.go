package group

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// An EventGroupMembers record, after the header and group (see the
// package doc), is version 1 only:
//
//	protocol type string | mode byte (0 or 1) |
//	generation varint (>= 0) | state byte (0-3) | protocol string | leader string |
//	member count uvarint | member...
//
// and each member:
//
//	id string | instance id string | client id string | client host string |
//	session timeout ms uvarint | rebalance timeout ms uvarint |
//	protocol count uvarint | {name string, metadata string}... |
//	topic count uvarint | {topic string}... |
//	assignment string |
//	assigned topic count uvarint | {topic string, count uvarint, {partition uvarint}...}...
//
// An empty assignment decodes as nil. No trailing bytes.

// maxTimeoutMs bounds a timeout in a record (a day: far above MaxSessionTimeout).
const maxTimeoutMs = 24 * 60 * 60 * 1000

func appendMembers(b []byte, ms *Membership) []byte {
	b = binary.AppendVarint(b, int64(ms.Generation))
	b = append(b, byte(ms.State))
	b = appendString(b, ms.Protocol)
	b = appendString(b, ms.Leader)
	b = binary.AppendUvarint(b, uint64(len(ms.Members)))
	for _, m := range ms.Members {
		for _, s := range []string{m.ID, m.InstanceID, m.ClientID, m.ClientHost} {
			b = appendString(b, s)
		}
		b = binary.AppendUvarint(b, uint64(m.SessionTimeout.Milliseconds()))
		b = binary.AppendUvarint(b, uint64(m.RebalanceTimeout.Milliseconds()))
		b = binary.AppendUvarint(b, uint64(len(m.Protocols)))
		for _, p := range m.Protocols {
			b = appendString(b, p.Name)
			b = appendString(b, string(p.Metadata))
		}
		b = binary.AppendUvarint(b, uint64(len(m.Topics)))
		for _, t := range m.Topics {
			b = appendString(b, t)
		}
		b = appendString(b, string(m.Assignment))
		b = binary.AppendUvarint(b, uint64(len(m.Partitions)))
		for _, tp := range m.Partitions {
			b = appendString(b, tp.Topic)
			b = binary.AppendUvarint(b, uint64(len(tp.Partitions)))
			for _, p := range tp.Partitions {
				b = binary.AppendUvarint(b, uint64(p))
			}
		}
	}
	return b
}

// count reads an element count; every element takes at least one byte,
// so a count beyond the bytes left is corrupt (and allocates nothing).
func (d *decoder) count(what string) int {
	return int(d.uvarint(uint64(len(d.b)), what))
}

func (d *decoder) bytes(what string) []byte {
	s := d.string(what)
	if s == "" {
		return nil
	}
	return []byte(s)
}

func (d *decoder) members() *Membership {
	ms := &Membership{
		Generation: int32(d.varint(0, math.MaxInt32, "generation")),
		State:      State(d.byte()),
		Protocol:   d.string("protocol"),
		Leader:     d.string("leader"),
	}
	n := d.count("member count")
	for i := 0; i < n && d.err == nil; i++ {
		var m MemberRecord
		m.ID, m.InstanceID = d.string("member id"), d.string("instance id")
		m.ClientID, m.ClientHost = d.string("client id"), d.string("client host")
		m.SessionTimeout = time.Duration(d.uvarint(maxTimeoutMs, "session timeout")) * time.Millisecond
		m.RebalanceTimeout = time.Duration(d.uvarint(maxTimeoutMs, "rebalance timeout")) * time.Millisecond
		np := d.count("protocol count")
		for j := 0; j < np && d.err == nil; j++ {
			m.Protocols = append(m.Protocols, Protocol{Name: d.string("protocol name"), Metadata: d.bytes("protocol metadata")})
		}
		nt := d.count("topic count")
		for j := 0; j < nt && d.err == nil; j++ {
			m.Topics = append(m.Topics, d.string("topic"))
		}
		m.Assignment = d.bytes("assignment")
		na := d.count("assigned topic count")
		for j := 0; j < na && d.err == nil; j++ {
			tp := TopicPartitions{Topic: d.string("assigned topic")}
			k := d.count("assigned partition count")
			for range k {
				if d.err != nil {
					break
				}
				tp.Partitions = append(tp.Partitions, int32(d.uvarint(math.MaxInt32, "assigned partition")))
			}
			m.Partitions = append(m.Partitions, tp)
		}
		ms.Members = append(ms.Members, m)
	}
	return ms
}

// validateMembers checks what a record must hold for Apply to rebuild a
// group the coordinator could have had.
func (ev Event) validateMembers() error {
	ms := ev.Members
	bad := func(what string, args ...any) error {
		return fmt.Errorf("%w: membership record: %s", ErrCorruptEvent, fmt.Sprintf(what, args...))
	}
	switch {
	case ev.Mode != LeaderAssigns && ev.Mode != BrokerAssigns:
		return bad("mode %d", ev.Mode)
	case ms.Generation < 0:
		return bad("generation %d", ms.Generation)
	case ms.State > Stable:
		return bad("state %d", ms.State)
	case ms.State == Empty && len(ms.Members) > 0,
		len(ms.Members) == 0 && ms.State != Empty && ms.State != PreparingRebalance:
		// A rebalance may wait for ids handed out (v4 joins) with no member left.
		return bad("%d members in state %s", len(ms.Members), ms.State)
	}
	ids, instances := map[string]bool{}, map[string]bool{}
	for _, m := range ms.Members {
		switch {
		case m.ID == "" || ids[m.ID]:
			return bad("member id %q empty or repeated", m.ID)
		case m.InstanceID != "" && instances[m.InstanceID]:
			return bad("instance id %q repeated", m.InstanceID)
		case m.SessionTimeout < 0 || m.RebalanceTimeout < 0 ||
			m.SessionTimeout%time.Millisecond != 0 || m.RebalanceTimeout%time.Millisecond != 0 ||
			m.SessionTimeout > maxTimeoutMs*time.Millisecond || m.RebalanceTimeout > maxTimeoutMs*time.Millisecond:
			return bad("member %q timeouts", m.ID)
		}
		for _, tp := range m.Partitions {
			for _, p := range tp.Partitions {
				if p < 0 {
					return bad("member %q partition %d", m.ID, p)
				}
			}
		}
		ids[m.ID] = true
		if m.InstanceID != "" {
			instances[m.InstanceID] = true
		}
	}
	if (ms.State == CompletingRebalance || ms.State == Stable) && !ids[ms.Leader] {
		return bad("leader %q is not a member", ms.Leader)
	}
	return nil
}
