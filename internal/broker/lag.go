package broker

import (
	"sort"
	"time"
)

// PartitionLag is how far a group is behind in one partition.
type PartitionLag struct {
	Topic          string
	Partition      int32
	Committed      int64 // -1: nothing committed (lag counts from the log start)
	HighWatermark  int64
	LogStartOffset int64
	// Messages is high watermark minus committed offset (Kafka's lag).
	Messages int64
	// Age is now minus the timestamp of the first unconsumed record, 0 when
	// caught up: how stale the group's view is, in time.
	Age time.Duration
	// Lost is true when the committed offset is below the log start:
	// retention deleted records the group never consumed.
	Lost bool
}

// GroupLag is a group's lag in every partition it committed or owns.
type GroupLag struct {
	Group      string
	Partitions []PartitionLag
	Messages   int64         // sum over partitions
	MaxAge     time.Duration // the slowest partition's Age
}

// GroupLag reports a group's lag in messages and in seconds.
func (b *Broker) GroupLag(groupID string) (GroupLag, error) {
	g, err := b.groups()
	if err != nil {
		return GroupLag{}, err
	}
	if err := g.lockChecked(); err != nil {
		return GroupLag{}, err
	}
	offs := g.coord.Offsets(groupID)
	info, _ := g.coord.Describe(groupID)
	g.mu.Unlock()
	committed := map[topicPart]int64{}
	for _, o := range offs {
		committed[topicPart{o.Topic, o.Partition}] = o.Offset
	}
	for _, m := range info.Members {
		for _, tp := range m.Partitions {
			for _, p := range tp.Partitions {
				if _, ok := committed[topicPart{tp.Topic, p}]; !ok {
					committed[topicPart{tp.Topic, p}] = -1
				}
			}
		}
	}
	out := GroupLag{Group: groupID}
	now := b.now()
	for tp, off := range committed {
		_, p, err := b.streams.partition(tp.topic, tp.partition)
		if err != nil {
			continue // the topic or partition is gone
		}
		l := partitionLag(p, b.offsetsOf(p), off, now)
		out.Partitions = append(out.Partitions, l)
		out.Messages += l.Messages
		out.MaxAge = max(out.MaxAge, l.Age)
	}
	sort.Slice(out.Partitions, func(i, j int) bool {
		a, c := out.Partitions[i], out.Partitions[j]
		return a.Topic < c.Topic || (a.Topic == c.Topic && a.Partition < c.Partition)
	})
	return out, nil
}

type topicPart struct {
	topic     string
	partition int32
}

// partitionLag is a group's lag on p, whose offsets are st (Broker.offsetsOf: on a cluster
// node holding no copy of p, its leader's; the lag in time is then unknown, 0, since the
// records are elsewhere).
func partitionLag(p *partitionRT, st PartitionState, committed int64, now time.Time) PartitionLag {
	l := PartitionLag{Topic: p.topic, Partition: p.index, Committed: committed,
		HighWatermark: st.HighWatermark, LogStartOffset: st.LogStartOffset}
	next := committed
	if next < st.LogStartOffset {
		l.Lost = committed >= 0
		next = st.LogStartOffset
	}
	if committed < 0 {
		l.Messages = st.HighWatermark - st.LogStartOffset
	} else {
		l.Messages = max(st.HighWatermark-committed, 0)
	}
	if next < st.HighWatermark {
		if ts := firstTimestamp(p, next); ts >= 0 {
			l.Age = max(now.Sub(time.UnixMilli(ts)), 0)
		}
	}
	return l
}

// firstTimestamp is the timestamp (unix ms) of the record at off, or -1
// (see sentAt).
func firstTimestamp(p *partitionRT, off int64) int64 {
	t := sentAt(p.log, off)
	if t.IsZero() {
		return -1
	}
	return t.UnixMilli()
}

// AllGroupLag reports every group's lag, sorted by group, for metrics.
func (b *Broker) AllGroupLag() []GroupLag {
	var out []GroupLag
	for _, s := range b.ListGroups() {
		if l, err := b.GroupLag(s.Group); err == nil && len(l.Partitions) > 0 {
			out = append(out, l)
		}
	}
	return out
}

// Headroom says how close the slowest group is to losing records to a
// topic's time retention.
type Headroom struct {
	Topic     string
	Retention time.Duration // negative: kept forever
	// SlowestGroup and SlowestAge: the group whose oldest unconsumed record
	// is oldest, and that age.
	SlowestGroup string
	SlowestAge   time.Duration
	// Headroom is Retention minus SlowestAge: how long the slowest group
	// may stall before retention deletes what it has not read. Negative
	// means it is already losing records. Unlimited without time retention.
	Headroom  time.Duration
	Unlimited bool
}

// RetentionHeadroom reports a topic's retention headroom over the groups
// that committed offsets in it.
func (b *Broker) RetentionHeadroom(topic string) (Headroom, error) {
	t, err := b.streams.topic(topic)
	if err != nil {
		return Headroom{}, err
	}
	s, _ := t.snapshot()
	h := Headroom{Topic: topic, Retention: s.Retention, Unlimited: s.Retention < 0}
	for _, gl := range b.AllGroupLag() {
		for _, l := range gl.Partitions {
			if l.Topic == topic && (h.SlowestGroup == "" || l.Age > h.SlowestAge) {
				h.SlowestGroup, h.SlowestAge = gl.Group, l.Age
			}
		}
	}
	if !h.Unlimited {
		h.Headroom = s.Retention - h.SlowestAge
	}
	return h, nil
}
