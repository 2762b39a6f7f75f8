package storage

import (
	"io"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// Section is a byte range of a segment file holding whole batches, for a
// network front-end to send without copying it through user space.
//
// The bytes are immutable while the segment exists. If retention deletes the
// segment (or TruncateSuffix cuts it) before the section is sent, WriteTo
// fails: the caller should read again and get ErrOffsetOutOfRange.
type Section struct {
	File     vfs.File
	Path     string
	Position int64 // byte position in File
	Length   int64 // bytes; 0 when there is nothing to read yet
}

// ReadSection is Read without the copy: it returns where the batches are.
// Only the batch headers are read (to find whole-batch boundaries); the
// batches are not checked against their CRC here, the consumer does that.
func (l *Log) ReadSection(offset int64, maxBytes int) (Section, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	loc, err := l.locate(offset)
	if err != nil || loc.seg == nil {
		return Section{}, err
	}
	end, err := loc.seg.sectionEnd(loc, int64(maxBytes))
	if err != nil {
		return Section{}, err
	}
	return Section{File: loc.seg.log, Path: loc.seg.path(logSuffix), Position: loc.pos, Length: end - loc.pos}, nil
}

// sectionEnd returns where the last whole batch within maxBytes ends (at
// least the first batch), jumping with the offset index and then walking
// batch headers for at most an index interval.
func (s *segment) sectionEnd(loc location, maxBytes int64) (int64, error) {
	end := loc.pos + loc.first.Size()
	target := loc.pos + maxBytes
	if target >= loc.limit {
		return max(end, loc.limit), nil
	}
	s.ix.Lock()
	jump := s.index.lastEntryBefore(target)
	s.ix.Unlock()
	pos := max(end, jump)
	err := s.walkHeaders(pos, loc.limit, func(p int64, h batch.Header) bool {
		if p+h.Size() > target {
			return false
		}
		pos = p + h.Size()
		return true
	})
	if err != nil && pos == end {
		return end, nil // serve the first batch; the damage shows on the next read
	}
	return pos, nil
}

// WriteTo sends the section to w. When w is a socket and the file is an OS
// file it uses sendfile(2) with an explicit offset (safe with concurrent
// readers of the same file); otherwise it copies with positional reads.
func (s Section) WriteTo(w io.Writer) (int64, error) {
	if s.Length == 0 {
		return 0, nil
	}
	if n, handled, err := sendfile(w, s); handled {
		return n, err
	}
	return io.Copy(w, io.NewSectionReader(s.File, s.Position, s.Length))
}
