package storage

import (
	"errors"
	"io"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// Section is a byte range of a segment file holding whole batches, every
// one of them checked (framing, CRC-32C, offsets) since this process read
// it from disk or wrote it, for a network front-end to send without copying
// it through user space.
//
// File is a view of the segment, not an open descriptor: each ReadAt, and
// WriteTo for the whole transfer, pins the file in the log's file cache
// (reopening it if the cache had closed it). The bytes are immutable while
// the segment exists. If retention deletes the segment (or TruncateSuffix
// cuts it, or the log is closed) before the section is sent, reads and
// WriteTo fail: the caller should read again and get ErrOffsetOutOfRange.
type Section struct {
	File     vfs.File
	Path     string
	Position int64 // byte position in File
	Length   int64 // bytes; 0 when there is nothing to read yet
}

// ReadSection is Read without the copy: it returns where the batches are.
// Batches not yet checked since Open are read and checked first (once: the
// segment remembers); a damaged one is quarantined and the section ends
// before it, or, if it is the first, starts after it.
func (l *Log) ReadSection(offset int64, maxBytes int) (Section, error) {
	sec, _, err := l.readSection(offset, maxBytes, nil)
	return sec, err
}

// readSection is ReadSection and, with keep, ReadSectionWhile.
func (l *Log) readSection(offset int64, maxBytes int, keep func(batch.Header) bool) (Section, bool, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for range maxRepairs {
		loc, err := l.locate(offset)
		if err != nil || loc.seg == nil {
			return Section{}, false, err
		}
		s := loc.seg
		sec := Section{File: sectionFile{s}, Path: s.path(logSuffix), Position: loc.pos}
		if keep != nil && !keep(loc.first) {
			return sec, true, nil
		}
		end, stopped := s.sectionEnd(loc, int64(maxBytes), keep)
		if !s.ver.covers(loc.pos, end) {
			res := s.scanFrom(nil, loc.pos, loc.first.BaseOffset, end, 0)
			s.ver.add(loc.pos, res.end, loc.first.BaseOffset, res.next, s.size.Load())
			ce, dmg := asDamage(res.err)
			if res.err != nil && !dmg {
				return Section{}, false, res.err
			}
			if dmg {
				_, qerr := l.quarantineDamage(loc.i, ce, loc.limit)
				if res.end == loc.pos {
					if qerr != nil {
						ce.Offset = offset
						return Section{}, false, qerr
					}
					continue
				}
				end, stopped = res.end, false
			}
		}
		sec.Length = end - loc.pos
		return sec, stopped, nil
	}
	return Section{}, false, errTooMuchDamage
}

// sectionEnd returns where the last whole batch within maxBytes ends (at
// least the first batch), before any quarantined range, and, with keep,
// before the first batch keep refuses (stopped). Without keep it jumps
// with the offset index and then walks batch headers for at most an index
// interval; an index entry whose header disagrees is dropped and the walk
// starts from the first batch instead. With keep it walks every header.
func (s *segment) sectionEnd(loc location, maxBytes int64, keep func(batch.Header) bool) (int64, bool) {
	end := loc.pos + loc.first.Size()
	limit := loc.limit
	if r, ok := s.nextQuarantined(end); ok && r.pos < limit {
		limit = r.pos
	}
	target := loc.pos + maxBytes
	if target >= limit && keep == nil {
		return max(end, limit), false
	}
	for range maxDistrust {
		pos, want := end, loc.first.NextOffset()
		if keep == nil {
			s.ix.Lock()
			jump, rel := s.index.lastEntryBefore(target)
			s.ix.Unlock()
			if jump > end {
				pos, want = jump, s.base+rel
			}
		}
		from, stopped := pos, false
		err := s.walkHeaders(pos, want, limit, func(p int64, h batch.Header) bool {
			if p+h.Size() > target {
				return false
			}
			if keep != nil && !keep(h) {
				stopped = true
				return false
			}
			pos = p + h.Size()
			return true
		})
		if ce, ok := asDamage(err); ok && ce.Position == from && from > end && s.distrust(from) {
			continue
		}
		if err != nil && pos == from && from > end {
			return end, false // cannot vouch for the jump: serve the first batch
		}
		return pos, stopped // on damage, what was good before it; the next read finds it
	}
	return end, false
}

// WriteTo sends the section to w. When w is a socket and the file is an OS
// file it uses sendfile(2) with an explicit offset (safe with concurrent
// readers of the same file); otherwise it copies with positional reads. The
// file is pinned in the cache for the whole transfer.
func (s Section) WriteTo(w io.Writer) (int64, error) {
	if s.Length == 0 {
		return 0, nil
	}
	f, release, err := pin(s.File)
	if err != nil {
		return 0, err
	}
	defer release()
	if n, handled, err := sendfileFrom(w, f, s.Position, s.Length); handled {
		return n, err
	}
	return io.Copy(w, io.NewSectionReader(f, s.Position, s.Length))
}

// sendfile sends the section with sendfile(2) if it can (see sendfileFrom).
func sendfile(w io.Writer, s Section) (int64, bool, error) {
	f, release, err := pin(s.File)
	if err != nil {
		return 0, true, err
	}
	defer release()
	return sendfileFrom(w, f, s.Position, s.Length)
}

// pin returns the open file behind a section's view, held open until
// release.
func pin(f vfs.File) (vfs.File, func(), error) {
	sf, ok := f.(sectionFile)
	if !ok {
		return f, func() {}, nil
	}
	of, err := sf.s.log.acquire()
	if err != nil {
		return nil, nil, sf.s.readErr(0, err)
	}
	return of, sf.s.log.release, nil
}

// sectionFile is a Section's read-only view of its segment file.
type sectionFile struct{ s *segment }

var errReadOnly = errors.New("storage: a section is read-only")

func (f sectionFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.s.log.ReadAt(p, off)
	if err != nil && err != io.EOF {
		err = f.s.readErr(off, err)
	}
	return n, err
}

func (f sectionFile) Write([]byte) (int, error) { return 0, errReadOnly }
func (f sectionFile) Sync() error               { return errReadOnly }
func (f sectionFile) Truncate(int64) error      { return errReadOnly }
func (f sectionFile) Size() (int64, error)      { return f.s.committed.Load(), nil }
func (f sectionFile) Name() string              { return f.s.path(logSuffix) }
func (f sectionFile) Close() error              { return nil }
