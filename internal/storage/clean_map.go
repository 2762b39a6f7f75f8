package storage

import (
	"crypto/sha256"
)

// offsetMap is the cleaner's map from a key's hash to the offset of its
// latest record, in memory bounded by construction: an open-addressing
// table of fixed capacity, filled to at most maxLoad (Kafka's cleaner
// sizes its dedupe buffer the same way).
//
// Keys are hashed to 128 bits of SHA-256: two keys that collide would
// make the cleaner drop one key's latest record for the other's, so the
// hash must not be one a producer can collide on purpose, and 2^-128 per
// pair is nothing at any log size.
type offsetMap struct {
	slots []mapSlot
	used  int
	limit int // most slots used
}

type mapSlot struct {
	hash [16]byte
	off  int64 // offset+1; 0: empty
}

// mapSlotBytes is what one slot costs, to turn a buffer size into slots.
const mapSlotBytes = 24

// maxLoad is the fill above which probing slows down.
const maxLoad = 0.9

// minMapSlots keeps a tiny configured buffer usable.
const minMapSlots = 64

func newOffsetMap(bufferBytes int64) *offsetMap {
	n := max(int(bufferBytes/mapSlotBytes), minMapSlots)
	return &offsetMap{slots: make([]mapSlot, n), limit: int(float64(n) * maxLoad)}
}

func hashKey(key []byte) [16]byte {
	s := sha256.Sum256(key)
	return [16]byte(s[:16])
}

// free is how many new keys still fit.
func (m *offsetMap) free() int { return m.limit - m.used }

// slot returns the index of h's slot, or of the empty slot where it goes.
func (m *offsetMap) slot(h [16]byte) int {
	// The hash is uniform: its first 8 bytes pick the start.
	i := int((uint64(h[0]) | uint64(h[1])<<8 | uint64(h[2])<<16 | uint64(h[3])<<24 |
		uint64(h[4])<<32 | uint64(h[5])<<40 | uint64(h[6])<<48 | uint64(h[7]&0x7f)<<56) % uint64(len(m.slots)))
	for m.slots[i].off != 0 && m.slots[i].hash != h {
		if i++; i == len(m.slots) {
			i = 0
		}
	}
	return i
}

// put records off as h's latest offset (offsets only grow as the cleaner
// walks the log). The caller checks free first: a full map refuses.
func (m *offsetMap) put(h [16]byte, off int64) bool {
	i := m.slot(h)
	if m.slots[i].off == 0 {
		if m.used >= m.limit {
			return false
		}
		m.used++
		m.slots[i].hash = h
	}
	m.slots[i].off = off + 1
	return true
}

// get returns h's latest offset.
func (m *offsetMap) get(h [16]byte) (int64, bool) {
	s := m.slots[m.slot(h)]
	return s.off - 1, s.off != 0
}
