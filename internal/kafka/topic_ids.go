package kafka

import (
	"sync"

	"github.com/sluice-mq/sluice/internal/broker"
)

// topicIDs remembers which topic each Kafka topic id names. Fetch v13+
// names topics by id only, in every request, so a scan of every topic per
// fetch would cost O(topics) on the hot path. Ids are derived (topicID), so
// the cache can only be stale, never wrong about an id it verifies: a hit
// is checked against the topic of that name now (a topic deleted and
// created again has a new id); a miss rescans once. Entries of deleted
// topics linger until looked up again: a few bytes each.
type topicIDs struct {
	m sync.Map // [16]byte -> string
}

// topicNameByID finds the topic a Kafka topic id names.
func (c *conn) topicNameByID(id [16]byte) (string, bool) {
	if id == ([16]byte{}) {
		return "", false
	}
	ids := &c.s.ids
	if v, ok := ids.m.Load(id); ok {
		name := v.(string)
		if s, ok := c.topicSettings(name); ok && topicID(s) == id {
			return name, true
		}
		ids.m.Delete(id)
	}
	found := ""
	for _, s := range c.s.b.ListTopics("") {
		tid := topicID(s)
		ids.m.Store(tid, s.Name)
		if tid == id {
			found = s.Name
		}
	}
	return found, found != ""
}

// topicIDsByName is every topic's id by name: one listing, for an answer
// that names many topics by id (OffsetFetch v10 of all a group's topics),
// where a topicSettings per topic would list every topic each time.
func (c *conn) topicIDsByName() map[string][16]byte {
	ts := c.s.b.ListTopics("")
	m := make(map[string][16]byte, len(ts))
	for _, s := range ts {
		m[s.Name] = topicID(s)
	}
	return m
}

// topicSettings returns the settings of the topic called exactly name.
func (c *conn) topicSettings(name string) (broker.TopicSettings, bool) {
	for _, s := range c.s.b.ListTopics(name) { // name is a prefix: few topics
		if s.Name == name {
			return s, true
		}
	}
	return broker.TopicSettings{}, false
}
