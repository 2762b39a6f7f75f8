package group

import (
	"cmp"
	"slices"
)

// assignPartitions gives every partition of every subscribed topic to
// exactly one member (BrokerAssigns). Members are taken in member id order
// and topics in name order so that the same membership always yields the
// same assignment. Members beyond the partition count stay idle.
func (c *Coordinator) assignPartitions(g *group) {
	ms := g.sortedMembers()
	slices.SortFunc(ms, func(a, b *member) int { return cmp.Compare(a.id, b.id) })
	owned := make(map[string]map[string][]int32, len(ms)) // member -> topic -> partitions
	give := func(m *member, topic string, p int32) {
		if owned[m.id] == nil {
			owned[m.id] = make(map[string][]int32)
		}
		owned[m.id][topic] = append(owned[m.id][topic], p)
	}
	topics := subscribedTopics(ms)
	if g.protocol == AssignorRoundRobin {
		assignRoundRobin(ms, topics, c.partitions, give)
	} else {
		assignRange(ms, topics, c.partitions, give)
	}
	for _, m := range ms {
		m.partitions = nil
		for _, topic := range sortedKeys(owned[m.id]) {
			m.partitions = append(m.partitions, TopicPartitions{Topic: topic, Partitions: owned[m.id][topic]})
		}
	}
}

func subscribedTopics(ms []*member) []string {
	set := make(map[string]bool)
	for _, m := range ms {
		for _, t := range m.topics {
			set[t] = true
		}
	}
	return sortedKeys(set)
}

func subscribers(ms []*member, topic string) []*member {
	var out []*member
	for _, m := range ms {
		if slices.Contains(m.topics, topic) {
			out = append(out, m)
		}
	}
	return out
}

// assignRange splits each topic's partitions into contiguous ranges, the
// first partitions%members subscribers getting one extra (Kafka's range).
func assignRange(ms []*member, topics []string, counts map[string]int32, give func(*member, string, int32)) {
	for _, topic := range topics {
		subs := subscribers(ms, topic)
		n := counts[topic]
		if len(subs) == 0 {
			continue
		}
		per, extra := int(n)/len(subs), int(n)%len(subs)
		p := int32(0)
		for i, m := range subs {
			take := per
			if i < extra {
				take++
			}
			for range take {
				give(m, topic, p)
				p++
			}
		}
	}
}

// assignRoundRobin deals all partitions of all topics, in order, to the
// members in turn, skipping members not subscribed to the topic at hand
// (Kafka's roundrobin). It balances better across many small topics.
func assignRoundRobin(ms []*member, topics []string, counts map[string]int32, give func(*member, string, int32)) {
	next := 0
	for _, topic := range topics {
		if len(subscribers(ms, topic)) == 0 {
			continue
		}
		for p := range counts[topic] {
			for !slices.Contains(ms[next%len(ms)].topics, topic) {
				next++
			}
			give(ms[next%len(ms)], topic, p)
			next++
		}
	}
}
