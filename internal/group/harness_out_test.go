package group

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

func errString(err error) string {
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	return "ok\n"
}

// parseOffsets reads "topic/partition=offset" words.
func parseOffsets(t *testing.T, words []string, meta string) []OffsetCommit {
	var out []OffsetCommit
	for _, w := range words {
		tp, off, ok := strings.Cut(w, "=")
		topic, part, ok2 := strings.Cut(tp, "/")
		p, err1 := strconv.Atoi(part)
		o, err2 := strconv.ParseInt(off, 10, 64)
		if !ok || !ok2 || err1 != nil || err2 != nil {
			t.Fatalf("bad offset %q", w)
		}
		out = append(out, OffsetCommit{Topic: topic, Partition: int32(p), Offset: o, LeaderEpoch: -1, Metadata: meta})
	}
	return out
}

func (h *harness) commit(t *testing.T, pos []string, kv map[string]string) string {
	req := CommitRequest{Group: "g", Generation: -1}
	if pos[0] != "-" {
		a := h.get(pos[0])
		req = CommitRequest{Group: a.group, MemberID: memberID(a, kv), InstanceID: instanceID(a, kv), Generation: a.gen}
	}
	if g, ok := kv["group"]; ok {
		req.Group = g
	}
	req.Generation = h.gen(t, &aliasState{gen: req.Generation}, kv)
	req.Offsets = parseOffsets(t, pos[1:], kv["meta"])
	errs, out, err := h.c.Commit(h.now, req)
	var b strings.Builder
	for i, e := range errs {
		if e != nil {
			fmt.Fprintf(&b, "partition %s/%d: %s", req.Offsets[i].Topic, req.Offsets[i].Partition, errString(e))
		}
	}
	return b.String() + h.output(out) + errString(err)
}

func (h *harness) partitions(t *testing.T, kv map[string]string) string {
	var s string
	for _, topic := range sortedKeys(kv) {
		n, err := strconv.Atoi(kv[topic])
		if err != nil {
			t.Fatal(err)
		}
		h.topics[topic] = int32(n)
		s += h.output(h.c.SetPartitions(h.now, topic, int32(n)))
	}
	return s + h.states()
}

func (h *harness) fetch(group string) string {
	var b strings.Builder
	for _, o := range h.c.Offsets(group) {
		fmt.Fprintf(&b, "%s/%d=%d meta=%q at +%s\n", o.Topic, o.Partition, o.Offset, o.Metadata, o.CommitTime.Sub(epoch))
	}
	if b.Len() == 0 {
		return "no offsets"
	}
	return b.String()
}

func (h *harness) describe(group string) string {
	info, ok := h.c.Describe(group)
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s found=%v gen=%d type=%q protocol=%q leader=%s\n",
		info.Group, info.State, ok, info.Generation, info.ProtocolType, info.Protocol, info.Leader)
	for _, m := range info.Members {
		fmt.Fprintf(&b, "  %s instance=%q meta=%q assignment=%q partitions=%s\n",
			m.MemberID, m.InstanceID, m.Metadata, m.Assignment, formatTPs(m.Partitions))
	}
	return b.String()
}

// restart replays the journal into a fresh coordinator, as the broker
// does at start-up; membership is gone, offsets remain.
func (h *harness) restart(t *testing.T) string {
	h.cfg.Incarnation += "r"
	h.c = New(h.cfg)
	for _, raw := range h.journal {
		ev, err := UnmarshalEvent(raw)
		if err != nil {
			t.Fatalf("replay: %v", err)
		}
		if err := h.c.Apply(ev); err != nil {
			t.Fatalf("apply: %v", err)
		}
	}
	for _, topic := range sortedKeys(h.topics) {
		h.c.SetPartitions(h.now, topic, h.topics[topic])
	}
	return fmt.Sprintf("replayed %d events\n", len(h.journal)) + h.states()
}

func formatTPs(tps []TopicPartitions) string {
	var parts []string
	for _, tp := range tps {
		var ps []string
		for _, p := range tp.Partitions {
			ps = append(ps, strconv.Itoa(int(p)))
		}
		parts = append(parts, tp.Topic+":"+strings.Join(ps, ","))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// output prints completed tickets, learning member ids and generations,
// and journals events.
func (h *harness) output(out Output) string {
	var b strings.Builder
	for _, r := range out.Joins {
		alias := h.tickets[r.Ticket]
		if r.MemberID != "" {
			h.get(alias).memberID = r.MemberID
		}
		if r.Err != nil {
			fmt.Fprintf(&b, "join t%d %s: error: %v member=%s\n", r.Ticket, alias, r.Err, r.MemberID)
			continue
		}
		h.get(alias).gen = r.Generation
		fmt.Fprintf(&b, "join t%d %s: member=%s gen=%d protocol=%s leader=%s", r.Ticket, alias, r.MemberID, r.Generation, r.Protocol, r.Leader)
		if len(r.Members) > 0 {
			var ms []string
			for _, m := range r.Members {
				ms = append(ms, fmt.Sprintf("%s(%s)", m.MemberID, m.Metadata))
			}
			fmt.Fprintf(&b, " members=%s", strings.Join(ms, ","))
		}
		if r.Assignment != nil {
			fmt.Fprintf(&b, " assigned=%s", formatTPs(r.Assignment))
		}
		b.WriteString("\n")
	}
	for _, r := range out.Syncs {
		alias := h.tickets[r.Ticket]
		if r.Err != nil {
			fmt.Fprintf(&b, "sync t%d %s: %s", r.Ticket, alias, errString(r.Err))
			continue
		}
		fmt.Fprintf(&b, "sync t%d %s: assignment=%q partitions=%s\n", r.Ticket, alias, r.Assignment, formatTPs(r.Partitions))
	}
	for _, r := range out.Removed {
		fmt.Fprintf(&b, "removed %s from %s: %s\n", r.MemberID, r.Group, r.Reason)
	}
	for _, ev := range out.Events {
		raw, err := ev.MarshalBinary()
		if err != nil {
			panic(err)
		}
		h.journal = append(h.journal, raw)
		fmt.Fprintf(&b, "event %s\n", formatEvent(ev))
	}
	return b.String()
}

func formatEvent(ev Event) string {
	if ev.Type == EventGroupDeleted {
		return "deleted " + ev.Group
	}
	if ev.Type == EventGroupProtocol {
		mode := "leader-assigns"
		if ev.Mode == BrokerAssigns {
			mode = "broker-assigns"
		}
		return "protocol " + ev.Group + " " + ev.ProtocolType + " " + mode
	}
	if ev.Type == EventOffsetsDeleted {
		var parts []string
		for _, o := range ev.Offsets {
			parts = append(parts, fmt.Sprintf("%s/%d", o.Topic, o.Partition))
		}
		return "offsets deleted " + ev.Group + " " + strings.Join(parts, " ")
	}
	var parts []string
	for _, o := range ev.Offsets {
		parts = append(parts, fmt.Sprintf("%s/%d=%d", o.Topic, o.Partition, o.Offset))
	}
	return "committed " + ev.Group + " " + strings.Join(parts, " ")
}

func (h *harness) state(group string) string {
	info, ok := h.c.Describe(group)
	if !ok {
		return "state " + group + ": none\n"
	}
	var ids []string
	for _, m := range info.Members {
		ids = append(ids, m.MemberID)
	}
	return fmt.Sprintf("state %s: %s gen=%d members=[%s]\n", group, info.State, info.Generation, strings.Join(ids, " "))
}

func (h *harness) states() string {
	var b strings.Builder
	for _, s := range h.c.List() {
		b.WriteString(h.state(s.Group))
	}
	return b.String()
}

func (h *harness) deleteOffsets(t *testing.T, pos []string) string {
	var tps []TopicPartitions
	for _, w := range pos[1:] {
		topic, part, _ := strings.Cut(w, "/")
		p, err := strconv.Atoi(part)
		if err != nil {
			t.Fatalf("bad partition %q", w)
		}
		tps = append(tps, TopicPartitions{Topic: topic, Partitions: []int32{int32(p)}})
	}
	errs, out, err := h.c.DeleteOffsets(h.now, pos[0], tps)
	var b strings.Builder
	for i, es := range errs {
		for j, e := range es {
			if e != nil {
				fmt.Fprintf(&b, "partition %s/%d: %s", tps[i].Topic, tps[i].Partitions[j], errString(e))
			}
		}
	}
	return b.String() + h.output(out) + errString(err)
}
