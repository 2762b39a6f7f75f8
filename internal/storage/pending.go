package storage

import (
	"sync"

	"github.com/sluice-mq/sluice/internal/batch"
)

// pending holds batches placed by appenders under SyncAlways until the
// syncer writes them, in pooled 1 MiB chunks: no buffer ever grows by
// copying, big groups allocate nothing once the pool is warm, and a
// partition keeps no memory when idle (sync.Pool drops chunks under GC).
type pending struct {
	chunks  []*[]byte
	size    int64
	appends int // Append calls in the group, for the commit-size metric
	// done is closed when the group's fate is decided (published, dropped
	// or failed): only its own appenders wake, not those of the next group.
	done chan struct{}
}

const chunkSize = 1 << 20

var chunkPool = sync.Pool{New: func() any {
	b := make([]byte, 0, chunkSize)
	return &b
}}

func (p *pending) write(b []byte) {
	for len(b) > 0 {
		if len(p.chunks) == 0 || len(*p.chunks[len(p.chunks)-1]) == chunkSize {
			p.chunks = append(p.chunks, chunkPool.Get().(*[]byte))
		}
		c := p.chunks[len(p.chunks)-1]
		n := min(len(b), chunkSize-len(*c))
		*c = append(*c, b[:n]...)
		b = b[n:]
		p.size += int64(n)
	}
}

// add appends the batches with consecutive base offsets from next (and the
// epoch if set), filling offsets; it returns the offset after them. The
// caller's bytes are copied, never modified.
func (p *pending) add(batches [][]byte, offsets []int64, next int64, setEpoch bool, epoch int32) int64 {
	if p.done == nil {
		p.done = make(chan struct{})
	}
	p.appends++
	for i, b := range batches {
		var hdr [batch.HeaderSize]byte
		copy(hdr[:], b)
		batch.SetBaseOffset(hdr[:], next)
		if setEpoch {
			batch.SetLeaderEpoch(hdr[:], epoch)
		}
		p.write(hdr[:])
		p.write(b[batch.HeaderSize:])
		h, _ := batch.ParseHeader(b)
		offsets[i] = next
		next += int64(h.LastOffsetDelta) + 1
	}
	return next
}

// bufs returns the chunks' bytes, in order.
func (p *pending) bufs() [][]byte {
	out := make([][]byte, len(p.chunks))
	for i, c := range p.chunks {
		out[i] = *c
	}
	return out
}

// release returns the chunks to the pool and wakes the group's appenders
// to check the outcome. Waking early is harmless: they then wait for the
// high watermark.
func (p *pending) release() {
	for _, c := range p.chunks {
		*c = (*c)[:0]
		chunkPool.Put(c)
	}
	if p.done != nil {
		close(p.done)
	}
	*p = pending{}
}
