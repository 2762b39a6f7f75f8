package storage

import (
	"crypto/sha256"
	"encoding/binary"
	"math/bits"
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
	limit int // most keys: maxLoad of the largest table the buffer allows
	// The table starts small and doubles up to the buffer's size, so a log
	// of few keys probes a table that fits in the CPU's caches, not one
	// of --compaction-buffer bytes.
	maxSlots int
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

// firstMapSlots is the table's starting size.
const firstMapSlots = 1 << 14

func newOffsetMap(bufferBytes int64) *offsetMap {
	// Powers of two, so a slot is picked with a mask, not a division.
	n := 1 << (bits.Len(uint(max(bufferBytes/mapSlotBytes, minMapSlots))) - 1)
	return &offsetMap{slots: make([]mapSlot, min(n, firstMapSlots)), limit: int(float64(n) * maxLoad), maxSlots: n}
}

// grow doubles the table (to at most maxSlots) and rehashes.
func (m *offsetMap) grow() {
	old := m.slots
	m.slots = make([]mapSlot, min(2*len(old), m.maxSlots))
	for _, s := range old {
		if s.off != 0 {
			m.slots[m.slot(s.hash)] = s
		}
	}
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
	mask := uint64(len(m.slots) - 1)
	i := binary.LittleEndian.Uint64(h[:8]) & mask
	for m.slots[i].off != 0 && m.slots[i].hash != h {
		i = (i + 1) & mask
	}
	return int(i)
}

// put records off as h's latest offset (offsets only grow as the cleaner
// walks the log). The caller checks free first: a full map refuses.
func (m *offsetMap) put(h [16]byte, off int64) bool {
	i := m.slot(h)
	if m.slots[i].off == 0 {
		if m.used >= m.limit {
			return false
		}
		if len(m.slots) < m.maxSlots && m.used+1 > int(float64(len(m.slots))*maxLoad) {
			m.grow()
			i = m.slot(h)
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
