package kafka

// topicsByID builds an answer's list of topics named by id, one entry per
// id in the order first seen: ShareFetch and ShareAcknowledge answer
// partitions grouped by topic id, from results that come per partition.
type topicsByID[T any] struct {
	index    map[[16]byte]int
	topics   *[]T
	newTopic func(id [16]byte) T
}

func newTopicsByID[T any](topics *[]T, newTopic func(id [16]byte) T) *topicsByID[T] {
	return &topicsByID[T]{index: map[[16]byte]int{}, topics: topics, newTopic: newTopic}
}

// get returns the answer's topic of id, appended on first use. The pointer
// is valid until the next get.
func (b *topicsByID[T]) get(id [16]byte) *T {
	i, ok := b.index[id]
	if !ok {
		i = len(*b.topics)
		b.index[id] = i
		*b.topics = append(*b.topics, b.newTopic(id))
	}
	return &(*b.topics)[i]
}
