package group

import "slices"

// Server-side assignors of KIP-848 consumer groups. Both are pure
// functions of the members (in member id order), their subscriptions over
// existing topics and, for uniform, the previous target.

type assignee struct {
	id     string
	topics []string // subscribed topics that exist, sorted
	prev   tpSet    // the previous target, which uniform keeps where it can
}

// assignUniform spreads all partitions over the members so that members
// with the same subscription hold counts within one of each other, and
// keeps partitions where they were (sticky), so a rebalance moves only
// what balance needs. With different subscriptions it is balanced as far
// as a greedy pass can (Kafka's uniform assignor is optimal there).
func assignUniform(ms []assignee, counts map[string]int32) map[string]tpSet {
	out := make(map[string]tpSet, len(ms))
	subsOf := map[string][]int{}
	active := 0
	for i, m := range ms {
		out[m.id] = tpSet{}
		for _, t := range m.topics {
			subsOf[t] = append(subsOf[t], i)
		}
		if len(m.topics) > 0 {
			active++
		}
	}
	total := 0
	for t := range subsOf {
		total += int(counts[t])
	}
	if active == 0 || total == 0 {
		return out
	}
	limit := (total + active - 1) / active
	owner := map[topicPartition]int{}
	count := make([]int, len(ms))
	give := func(i int, tp topicPartition) {
		if o, ok := owner[tp]; ok {
			count[o]--
			delete(out[ms[o].id], tp)
		}
		owner[tp], out[ms[i].id][tp] = i, true
		count[i]++
	}
	for i, m := range ms { // sticky: keep up to the fair share
		for _, tp := range sortedTPs(m.prev) {
			_, taken := owner[tp]
			if count[i] < limit && !taken && tp.partition < counts[tp.topic] && slices.Contains(m.topics, tp.topic) {
				give(i, tp)
			}
		}
	}
	for _, t := range sortedKeys(subsOf) { // the rest to the least loaded subscriber
		for p := range counts[t] {
			tp := topicPartition{t, p}
			if _, taken := owner[tp]; !taken {
				give(leastLoaded(subsOf[t], count), tp)
			}
		}
	}
	for range 16 { // balance: move from a member two or more above a subscriber
		moved := false
		for _, t := range sortedKeys(subsOf) {
			for p := range counts[t] {
				tp := topicPartition{t, p}
				if j := leastLoaded(subsOf[t], count); count[owner[tp]] > count[j]+1 {
					give(j, tp)
					moved = true
				}
			}
		}
		if !moved {
			break
		}
	}
	return out
}

func leastLoaded(candidates []int, count []int) int {
	best := candidates[0]
	for _, i := range candidates[1:] {
		if count[i] < count[best] {
			best = i
		}
	}
	return best
}

// assignRangeServer gives each member, per topic, a contiguous range of
// partitions, the first partitions%subscribers members one more (Kafka's
// range): members subscribed to co-partitioned topics get the same
// partition numbers of each.
func assignRangeServer(ms []assignee, counts map[string]int32) map[string]tpSet {
	out := make(map[string]tpSet, len(ms))
	subsOf := map[string][]string{}
	for _, m := range ms {
		out[m.id] = tpSet{}
		for _, t := range m.topics {
			subsOf[t] = append(subsOf[t], m.id)
		}
	}
	for t, subs := range subsOf {
		n := int(counts[t])
		per, extra := n/len(subs), n%len(subs)
		p := int32(0)
		for i, id := range subs {
			take := per
			if i < extra {
				take++
			}
			for range take {
				out[id][topicPartition{t, p}] = true
				p++
			}
		}
	}
	return out
}
