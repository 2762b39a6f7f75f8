package kafka

import (
	"encoding/binary"
	"fmt"

	"github.com/sluice-mq/sluice/internal/broker"
)

// writeFetch writes a Fetch response by hand: the framing (size, header,
// topics, partitions) is encoded here, and each partition's record bytes go
// straight from the segment file to the socket with sendfile. The lengths
// are all known up front (a section's length is fixed when it is located),
// so even flexible versions' varint lengths can precede the data.
//
// Layout, v4-v12 (v12 is flexible: compact arrays, strings and bytes, and
// an empty tag section after each struct and after the header):
//
//	throttle_ms int32 | error_code int16 | session_id int32   (v7+ for the last two)
//	topics: [name (v0-12) or topic_id uuid (v13+) | partitions: [partition int32 | error_code int16 |
//	        high_watermark int64 | last_stable_offset int64 |
//	        log_start_offset int64 (v5+) | aborted_transactions: null, or for
//	        read_committed [producer_id int64 | first_offset int64] |
//	        preferred_read_replica int32 (v11+) | records bytes]]
func (c *conn) writeFetch(h reqHeader, rep *fetchReply) error {
	fw := fetchWriter{flex: rep.version >= 12}
	fw.buf = append(c.out[:0], 0, 0, 0, 0)
	fw.buf = binary.BigEndian.AppendUint32(fw.buf, uint32(h.corrID))
	fw.tags()
	fw.body(rep)
	// Now the total is known: everything buffered plus every section.
	size := int64(len(fw.buf)) - 4
	for _, p := range fw.pending {
		size += p.sec.Length
	}
	if size > 1<<31-1 {
		return fmt.Errorf("fetch response of %d bytes", size)
	}
	binary.BigEndian.PutUint32(fw.buf, uint32(size))
	c.armWrite()
	start := 0
	for _, p := range fw.pending {
		if _, err := c.nc.Write(fw.buf[start:p.at]); err != nil {
			return err
		}
		if n, err := p.sec.WriteTo(c.nc); err != nil || n != p.sec.Length {
			// Part of the response is on the wire: the stream is broken,
			// only closing the connection leaves the client consistent.
			return fmt.Errorf("sending %s: %d of %d bytes: %w", p.sec.Path, n, p.sec.Length, err)
		}
		start = p.at
	}
	_, err := c.nc.Write(fw.buf[start:])
	if cap(fw.buf) <= 1<<20 {
		c.out = fw.buf
	}
	return err
}

// fetchWriter encodes the framing; pending notes where, in buf, each
// section's bytes belong.
type fetchWriter struct {
	flex    bool
	buf     []byte
	pending []pendingSection
}

type pendingSection struct {
	at  int // position in buf the section follows
	sec broker.Section
}

func (w *fetchWriter) body(rep *fetchReply) {
	w.i32(0) // throttle_ms
	if rep.version >= 7 {
		w.i16(0) // error_code
		w.i32(0) // session_id: no fetch sessions
	}
	w.arrayLen(len(rep.topics))
	for _, t := range rep.topics {
		if rep.version >= 13 {
			w.buf = append(w.buf, t.id[:]...) // topic_id replaces the name (KIP-516)
		} else {
			w.str(t.name)
		}
		w.arrayLen(len(t.parts))
		for _, p := range t.parts {
			w.partition(rep.version, p)
		}
		w.tags()
	}
	w.tags()
}

func (w *fetchWriter) partition(version int16, p fetchPart) {
	w.i32(p.partition)
	w.i16(p.code)
	w.i64(p.st.HighWatermark)
	w.i64(p.st.LastStableOffset)
	if version >= 5 {
		w.i64(p.st.LogStartOffset)
	}
	if p.aborted == nil {
		w.nullArray() // aborted_transactions: read_uncommitted
	} else {
		w.arrayLen(len(p.aborted))
		for _, a := range p.aborted {
			w.i64(a.ProducerID)
			w.i64(a.FirstOffset)
			w.tags()
		}
	}
	if version >= 11 {
		w.i32(-1) // preferred_read_replica: none
	}
	switch {
	case p.sec.Length > 0:
		w.bytesLen(p.sec.Length)
		w.pending = append(w.pending, pendingSection{at: len(w.buf), sec: p.sec})
	default:
		w.bytesLen(int64(len(p.gap))) // 0 without a gap
		w.buf = append(w.buf, p.gap...)
	}
	w.tags()
}

func (w *fetchWriter) i16(v int16) { w.buf = binary.BigEndian.AppendUint16(w.buf, uint16(v)) }
func (w *fetchWriter) i32(v int32) { w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(v)) }
func (w *fetchWriter) i64(v int64) { w.buf = binary.BigEndian.AppendUint64(w.buf, uint64(v)) }

func (w *fetchWriter) tags() {
	if w.flex {
		w.buf = append(w.buf, 0)
	}
}

func (w *fetchWriter) arrayLen(n int) {
	if w.flex {
		w.buf = binary.AppendUvarint(w.buf, uint64(n)+1)
		return
	}
	w.i32(int32(n))
}

func (w *fetchWriter) nullArray() {
	if w.flex {
		w.buf = append(w.buf, 0)
		return
	}
	w.i32(-1)
}

func (w *fetchWriter) str(s string) {
	if w.flex {
		w.buf = binary.AppendUvarint(w.buf, uint64(len(s))+1)
	} else {
		w.i16(int16(len(s)))
	}
	w.buf = append(w.buf, s...)
}

func (w *fetchWriter) bytesLen(n int64) {
	if w.flex {
		w.buf = binary.AppendUvarint(w.buf, uint64(n)+1)
		return
	}
	w.i32(int32(n))
}
