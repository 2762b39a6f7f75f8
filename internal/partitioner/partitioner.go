// Package partitioner maps a record key to a partition exactly as Kafka's
// default partitioner does, so that a key produced through sluice's native API
// lands on the same partition as the same key produced by a Java, franz-go,
// Sarama or librdkafka (murmur2 mode) client.
//
// It owns the hash and the key-to-partition rule and nothing else. It must
// never change its output for a given (key, partitions): stored data and every
// Kafka client depend on it. Choosing a partition for a record without a key
// (sticky or round-robin spreading) is the producer path's job, not this
// package's, because only the caller can tell "no key" from "empty key".
package partitioner

// seed and mix are the constants Kafka's Utils.murmur2 fixes; changing either
// would move every key to a different partition.
const (
	seed uint32 = 0x9747b28c
	mix  uint32 = 0x5bd1e995
	rot         = 24
)

// Murmur2 returns Kafka's variant of MurmurHash2 for b: 32-bit, seed
// 0x9747b28c, little-endian 4-byte blocks. A nil and an empty slice hash the
// same.
func Murmur2(b []byte) uint32 {
	n := len(b)
	h := seed ^ uint32(n)
	body := n &^ 3
	for i := 0; i < body; i += 4 {
		k := uint32(b[i]) | uint32(b[i+1])<<8 | uint32(b[i+2])<<16 | uint32(b[i+3])<<24
		k *= mix
		k ^= k >> rot
		k *= mix
		h *= mix
		h ^= k
	}
	// The 1..3 trailing bytes fold in the same order as the Java switch with
	// fall-through: byte 2, then 1, then 0, then one multiply.
	switch n & 3 {
	case 3:
		h ^= uint32(b[body+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(b[body+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(b[body])
		h *= mix
	}
	h ^= h >> 13
	h *= mix
	h ^= h >> 15
	return h
}

// toPositive is Kafka's Utils.toPositive: it clears the sign bit rather than
// taking an absolute value, so math.MinInt32 maps to 0 instead of staying
// negative.
func toPositive(h uint32) int32 { return int32(h & 0x7fffffff) }

// ForKey returns the partition Kafka's default partitioner picks for key among
// partitions partitions. partitions must be positive; otherwise ForKey returns
// -1 rather than panicking, so a bad topic description cannot crash a caller.
func ForKey(key []byte, partitions int32) int32 {
	if partitions <= 0 {
		return -1
	}
	return toPositive(Murmur2(key)) % partitions
}
