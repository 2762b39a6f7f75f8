package meta

import (
	"slices"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// Group is the metadata Raft group: the catalog.
const Group multiraft.GroupID = 1

// FirstDataGroup is the first partition group id. Ids are handed out in apply from
// State.NextGroup, one per partition, and never reused, not even after a topic is deleted:
// a group id names one partition's log for the life of the cluster.
const FirstDataGroup multiraft.GroupID = 2

// Node is a registered node and the addresses clients and peers reach it at.
type Node struct {
	ID        multiraft.NodeID
	KafkaAddr string // host:port Kafka clients are told (advertised), "" unknown
	HTTPAddr  string // host:port of the native API listener, for forwarding, "" unknown
	SQSAddr   string // host:port of the SQS listener, for forwarding, "" unknown
}

// Partition is one partition's placement.
type Partition struct {
	Group    multiraft.GroupID
	Replicas []multiraft.NodeID // first one is the preferred leader
	// Old, while the replica set is changing (membership.go), are the replicas it had:
	// every node in Replicas or Old hosts the group until the move is done. nil: no move.
	Old []multiraft.NodeID
	// Moved: the group's replicas changed since it was created, so Replicas are no
	// longer its initial voters and no node may bootstrap it with them.
	Moved bool
	// Pinned: an operator placed the replicas (OpReassign), so the rebalancer leaves them
	// be (Kafka never moves replicas by itself). Removing a node re-places its replicas
	// anyway, and unpins what it re-placed.
	Pinned bool
	// Original, while a reassignment moves the group, is the replicas it had before the
	// reassignment (kept when another replaces it; nil for a removal's or a rebalance's
	// move): what cancelling goes back to (OpCancelReassign).
	Original []multiraft.NodeID
}

// Topic is one topic of the catalog. A *Topic handed out is never modified: a change makes
// a new one.
type Topic struct {
	Name string
	// ID is the cluster-wide topic id (Kafka's topic id, a UUID): a hash of the creating
	// entry's index and term and the name, so a topic deleted and created again under the
	// same name gets a new id.
	ID         [16]byte
	Settings   []byte // opaque to meta: the broker's JSON of the topic settings (nil: none)
	Partitions []Partition
	Version    uint64 // the log index of the last change to this topic
}

// ReplicationFactor is the number of replicas of the topic's partitions (they all have
// the same number).
func (t *Topic) ReplicationFactor() int {
	if len(t.Partitions) == 0 {
		return 0
	}
	return len(t.Partitions[0].Replicas)
}

// State is the catalog as of an applied index. It is an immutable value: apply builds a new
// one and never mutates one handed out, so readers need no lock; they must not modify it.
type State struct {
	Index uint64 // last applied index
	// CatalogChanged is the index of the last entry applied that was not a transaction
	// record (txns.go): a watcher of topics, queues and nodes need not look again while
	// it stays. A restored snapshot sets it to its Index.
	CatalogChanged uint64
	Nodes          []Node // sorted by ID
	Topics         map[string]*Topic
	Queues         map[string]*Queue // queue.go
	NextGroup      multiraft.GroupID
	// Joined are the nodes added with AddNode, with their Raft transport address;
	// Removed the nodes removed, never admitted again (membership.go). Both replaced
	// whole on change, like the rest.
	Joined  map[multiraft.NodeID]string
	Removed map[multiraft.NodeID]bool
	// GroupConfigs are groups' configs by group id, the broker's JSON (groupconfig.go);
	// replaced whole on change.
	GroupConfigs map[string][]byte
	// Txns are Kafka transactions' coordinator records by transactional id (txns.go);
	// replaced whole on change.
	Txns map[string]TxnRecord
	// Level is the feature level committed (features.go; 0: never raised, LevelBase).
	// Read it with FeatureLevel.
	Level int
	// ReceiptKey authenticates the receipts of replicated queues and subscriptions
	// (ReceiptKeyLen bytes; nil until the level reaches LevelReceiptKey): the cluster's
	// one key, so a receipt an old leader handed out opens on the new one. Set once, by the
	// first OpSetFeatureLevel to that level, never changed.
	ReceiptKey []byte
}

// emptyState is the catalog before any entry.
func emptyState() *State {
	return &State{Topics: map[string]*Topic{}, Queues: map[string]*Queue{}, NextGroup: FirstDataGroup}
}

// Node returns the registered node id, if any.
func (s *State) Node(id multiraft.NodeID) (Node, bool) {
	i, ok := slices.BinarySearchFunc(s.Nodes, id, func(n Node, id multiraft.NodeID) int {
		return cmpID(n.ID, id)
	})
	if !ok {
		return Node{}, false
	}
	return s.Nodes[i], true
}

// TopicNames returns the topics' names, sorted.
func (s *State) TopicNames() []string {
	names := make([]string, 0, len(s.Topics))
	for n := range s.Topics {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// clone returns a copy of s that apply may change: the node slice and topic map are new,
// the topics are shared (apply replaces a topic it changes, never writes into one).
func (s *State) clone() *State {
	c := *s
	c.Nodes = slices.Clone(s.Nodes)
	c.Topics = make(map[string]*Topic, len(s.Topics)+1)
	for k, v := range s.Topics {
		c.Topics[k] = v
	}
	c.Queues = make(map[string]*Queue, len(s.Queues)+1)
	for k, v := range s.Queues {
		c.Queues[k] = v
	}
	return &c
}

func cmpID[T ~uint64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// MaxTopicName is Kafka's limit on a topic name's length.
const MaxTopicName = 249

// ValidTopicName reports whether name is a legal topic name, by Kafka's rule: 1 to 249
// characters of ASCII letters, digits, '.', '_' and '-', and neither "." nor "..".
func ValidTopicName(name string) bool {
	if len(name) == 0 || len(name) > MaxTopicName || name == "." || name == ".." {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}
