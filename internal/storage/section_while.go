package storage

import "github.com/sluice-mq/sluice/internal/batch"

// ReadSectionWhile is ReadSection that also ends the section before the
// first batch keep refuses: a reader that cannot take some batches (a
// Kafka client too old for zstd) gets the ones before it, and the next
// read starts at the refused one. keep sees each batch's header as
// batch.ParseHeader decodes it, so no caller reads header bytes itself.
//
// stopped reports that keep refused the batch the section ends before;
// with an empty section it means the batch at offset itself was refused
// (the reader can never get past it). Unlike ReadSection, every header up
// to the cut is read, since the offset index cannot say which batches keep
// would refuse. A damaged header ends the section after the good batches
// before it; the next read reports the damage.
func (l *Log) ReadSectionWhile(offset int64, maxBytes int, keep func(batch.Header) bool) (sec Section, stopped bool, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	loc, err := l.locate(offset)
	if err != nil || loc.seg == nil {
		return Section{}, false, err
	}
	sec = Section{File: loc.seg.log, Path: loc.seg.path(logSuffix), Position: loc.pos}
	if !keep(loc.first) {
		return sec, true, nil
	}
	end := loc.pos + loc.first.Size() // the first batch goes even if over maxBytes
	target := loc.pos + int64(maxBytes)
	_ = loc.seg.walkHeaders(end, loc.limit, func(p int64, h batch.Header) bool {
		if p+h.Size() > target {
			return false
		}
		if !keep(h) {
			stopped = true
			return false
		}
		end = p + h.Size()
		return true
	})
	sec.Length = end - loc.pos
	return sec, stopped, nil
}
