package storage

import (
	"fmt"
	"math"
)

// SetSegmentBytes changes the size at which the log rolls its active
// segment (Options.SegmentBytes), for a topic whose segment.bytes
// changed: the next append that would pass it rolls, segments already
// sealed keep their size, and the cleaner groups its runs by it. It is
// not persisted: the owner passes it again in Options at the next Open.
func (l *Log) SetSegmentBytes(n int64) error {
	if n <= 0 || n > math.MaxInt32 {
		return fmt.Errorf("storage: SegmentBytes %d: want 1 to %d", n, math.MaxInt32)
	}
	l.segBytes.Store(n)
	return nil
}
