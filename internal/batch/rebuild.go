package batch

import (
	"encoding/binary"
)

// Rebuild encodes a batch that keeps h's batch-level fields — base offset,
// lastOffsetDelta, leader epoch, timestamps, producer id, epoch and base
// sequence, and the transactional, control and timestamp-type attributes —
// around a subset of its records (each keeping its own offset and
// timestamp), uncompressed. It is what log compaction writes: offsets of
// removed records stay unused, and the producer's sequence range is the
// batch's original one, so idempotent dedup state rebuilt from the log
// still holds. No records gives an empty batch (recordCount 0), as Kafka
// keeps for the last batch of a producer.
//
// records must be h's own, in offset order, within [h.BaseOffset,
// h.LastOffset()].
func Rebuild(h Header, records []Record) []byte {
	b := make([]byte, HeaderSize, HeaderSize+estimate(records))
	var rec []byte
	for _, r := range records {
		rec = appendRecordBody(rec[:0], r, r.Timestamp-h.BaseTimestamp, r.Offset-h.BaseOffset)
		b = binary.AppendVarint(b, int64(len(rec)))
		b = append(b, rec...)
	}
	be := binary.BigEndian
	be.PutUint64(b[0:], uint64(h.BaseOffset))
	be.PutUint32(b[8:], uint32(len(b)-LengthSize))
	be.PutUint32(b[12:], uint32(h.PartitionLeaderEpoch))
	b[offMagic] = Magic
	be.PutUint16(b[21:], uint16(h.Attributes&^attrCodecMask))
	be.PutUint32(b[23:], uint32(h.LastOffsetDelta))
	be.PutUint64(b[27:], uint64(h.BaseTimestamp))
	be.PutUint64(b[35:], uint64(h.MaxTimestamp))
	be.PutUint64(b[43:], uint64(h.ProducerID))
	be.PutUint16(b[51:], uint16(h.ProducerEpoch))
	be.PutUint32(b[53:], uint32(h.BaseSequence))
	be.PutUint32(b[57:], uint32(len(records)))
	be.PutUint32(b[offCRC:], ComputeCRC(b))
	return b
}

// Fillers are empty batches (recordCount 0) that stand for the offsets [from, to) of a
// cleaned log that hold no batch: a copy of the log laid end to end with them keeps every
// record at its offset without a gap (a log's own offset checks accept a gap only in a
// segment its cleaner wrote). They carry no producer, epoch as their leader epoch and ts
// as their timestamps (the next kept batch's, so time retention and time lookups read
// the same age around the gap). One batch spans at most 2^31 offsets.
func Fillers(from, to int64, epoch int32, ts int64) [][]byte {
	var out [][]byte
	for from < to {
		n := min(to-from, 1<<31)
		out = append(out, Rebuild(Header{BaseOffset: from, LastOffsetDelta: int32(n - 1), PartitionLeaderEpoch: epoch,
			BaseTimestamp: ts, MaxTimestamp: ts, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, nil))
		from += n
	}
	return out
}
