package meta

import (
	"crypto/sha256"
	"encoding/binary"
	"hash/fnv"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// DefaultReplicationFactor is the replication factor of a topic created with none (<= 0),
// capped at the number of registered nodes.
const DefaultReplicationFactor = 3

// place returns the placement of partitions from..to-1 of topic name with rf replicas each,
// taking one new group id per partition from NextGroup.
//
// The rule: the registered nodes sorted by id, n of them; start = FNV-1a(name) mod n; the
// replicas of partition p are the rf nodes at positions start+p, start+p+1, ... (mod n).
// Consecutive partitions therefore have consecutive preferred leaders (the first replica),
// so a topic's leaders are spread evenly over the nodes, and the start spreads different
// topics' partition 0 over the nodes rather than piling them on the lowest id. The rule
// reads nothing but the name, p and the registered nodes, so every replica computes it the
// same. Partitions added later are placed by the same rule over the nodes registered then;
// existing partitions never move (moving a replica is a membership change, a rebalance's
// job, not the catalog's).
func (s *State) place(name string, from, to, rf int) []Partition {
	n := len(s.Nodes)
	h := fnv.New32a()
	h.Write([]byte(name))
	start := int(h.Sum32() % uint32(n))
	parts := make([]Partition, 0, to-from)
	for p := from; p < to; p++ {
		reps := make([]multiraft.NodeID, rf)
		for i := range reps {
			reps[i] = s.Nodes[(start+p+i)%n].ID
		}
		parts = append(parts, Partition{Group: s.NextGroup, Replicas: reps})
		s.NextGroup++
	}
	return parts
}

// topicID derives a topic's id from the entry that creates it: SHA-256 of a domain tag,
// the entry's index and term and the name, cut to 16 bytes and marked as an RFC 9562
// version 8 (custom) UUID. The index makes it unique for the life of the cluster (no two
// committed entries share one), so a topic created again after a delete gets a new id, as
// Kafka requires of topic ids.
func topicID(e multiraft.Entry, name string) [16]byte {
	h := sha256.New()
	h.Write([]byte("sluice topic id\x00"))
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], e.Index)
	binary.BigEndian.PutUint64(b[8:], e.Term)
	h.Write(b[:])
	h.Write([]byte(name))
	var id [16]byte
	copy(id[:], h.Sum(nil))
	id[6] = id[6]&0x0f | 0x80 // version 8
	id[8] = id[8]&0x3f | 0x80 // RFC variant
	return id
}
