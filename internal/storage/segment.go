package storage

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// File name suffixes of a segment. The stem is the base offset, 20 digits.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
)

func segmentName(base int64, suffix string) string {
	return fmt.Sprintf("%020d%s", base, suffix)
}

// parseSegmentName returns the base offset of a file named like a segment.
func parseSegmentName(name, suffix string) (int64, bool) {
	stem, ok := strings.CutSuffix(name, suffix)
	if !ok || len(stem) != 20 {
		return 0, false
	}
	base, err := strconv.ParseInt(stem, 10, 64)
	return base, err == nil && base >= 0
}

// segEnv is what every segment of a log shares.
type segEnv struct {
	fs       vfs.FS
	dir      string
	interval int64 // Options.IndexIntervalBytes
	prealloc int64 // Options.PreallocateBytes
	maxBatch int   // Options.MaxBatchBytes: resync looks for batches no larger
	logger   *slog.Logger
	files    *FileCache
	q        *quarantine // the log's damaged batches
}

// segment is one .log file and its two sparse indexes.
//
// The .log file is written only by the appender holding Log.wmu, always at
// its end; everything below committed is immutable until a TruncateSuffix or
// deletion, which hold Log.mu exclusively. Readers use positional reads.
type segment struct {
	*segEnv
	base int64
	// log is opened read-write on demand through the file cache, so a sealed
	// segment can become active again after TruncateSuffix.
	log *cachedFile

	// size is the file length including unsynced bytes; written under Log.wmu.
	size atomic.Int64
	// committed is how many bytes readers may see (acknowledged data).
	committed atomic.Int64
	created   time.Time // for roll by age; reset to Now at Open
	// sealedNext is the offset after a sealed segment (the next one's base);
	// written under Log.wmu and Log.mu when the segment is sealed or reopened.
	sealedNext int64
	// cleanEnd is the log end the last clean close sealed the active
	// segment at, when Open found its index files so (index.sealTail).
	cleanEnd int64

	ix      sync.Mutex // guards index below
	index   segIndex
	deleted atomic.Bool // removed by retention: reads fail with ErrOffsetOutOfRange

	// gapped: the cleaner rewrote this segment (a .compacted marker sits
	// next to it, clean_marker.go), so its batches may skip offsets: a
	// batch's base may be above the previous one's end, never below.
	gapped bool
	// mark is what the marker says (clean_marker.go); zero without one.
	mark markerInfo

	ver verified                 // which bytes have had their CRC checked (verify.go)
	qr  atomic.Pointer[[]qrange] // quarantined byte ranges, sorted; nil: none
}

func (s *segment) path(suffix string) string {
	return filepath.Join(s.dir, segmentName(s.base, suffix))
}

// createSegment makes the three empty files of a new segment and makes their
// directory entries durable, so a later fdatasync of the .log is enough.
func createSegment(env *segEnv, base int64, now time.Time) (_ *segment, err error) {
	s := &segment{segEnv: env, base: base, created: now}
	fs, dir := env.fs, env.dir
	var files []*cachedFile
	defer func() {
		if err != nil {
			for _, f := range files {
				f.drop()
			}
			for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
				fs.Remove(s.path(suf))
			}
		}
	}()
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
		f, err := env.files.create(fs, s.path(suf))
		if err != nil {
			return nil, fmt.Errorf("storage: create segment: %w", err)
		}
		files = append(files, f)
	}
	if err := fs.SyncDir(dir); err != nil {
		return nil, fmt.Errorf("storage: create segment: %w", err)
	}
	s.log = files[0]
	s.index = segIndex{loaded: true, idxFile: files[1], timeFile: files[2], maxTS: -1, maxTSKnown: true, interval: env.interval}
	s.ver.reset(0, base) // everything it will hold is written, and so checked, by this process
	s.preallocate()
	return s, nil
}

// preallocate makes the .log write zeros ahead of its appends (see
// vfs.Preallocator) when the log asks for it and the file system can; only
// the active segment does. The zeros a crash leaves behind are a torn tail
// to recovery, which cuts them; roll cuts them before sealing.
func (s *segment) preallocate() {
	if s.prealloc <= 0 {
		return
	}
	if err := s.log.setPrealloc(s.prealloc); err != nil {
		s.logger.Warn("storage: preallocation unavailable; appends grow the file", "segment", s.path(logSuffix), "err", err)
	}
}

// trimPrealloc cuts the zeros a preallocating .log holds past its end, and
// stops preallocating.
func (s *segment) trimPrealloc() error {
	if !s.log.preallocates() {
		return nil
	}
	s.log.setPrealloc(0)
	return s.log.Truncate(s.size.Load())
}

// openSegment names an existing segment without opening it: its size comes
// from the directory, so Open costs no descriptor per segment.
func openSegment(env *segEnv, base int64, now time.Time) (*segment, error) {
	s := &segment{segEnv: env, base: base, created: now}
	st, err := env.fs.Stat(s.path(logSuffix))
	if err != nil {
		return nil, fmt.Errorf("storage: open segment: %w", err)
	}
	s.log = env.files.handle(env.fs, s.path(logSuffix))
	s.size.Store(st.Size())
	s.committed.Store(st.Size())
	s.index.maxTS, s.index.interval = -1, env.interval
	s.ver.reset(-1, 0) // nothing checked yet: written by an earlier process
	return s, nil
}

// close releases the segment's files. A read or a sendfile still using one
// finishes first.
func (s *segment) close() error {
	s.ix.Lock()
	s.index.closeFiles()
	s.ix.Unlock()
	s.log.drop()
	return nil
}

// remove closes and deletes the segment's files, the .log first so that a
// crash in between leaves only orphan indexes, which Open deletes.
func (s *segment) remove() error {
	s.deleted.Store(true)
	s.close()
	s.q.forget(s, 0)
	var first error
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, markerSuffix} {
		if err := s.fs.Remove(s.path(suf)); err != nil && first == nil && suf == logSuffix {
			first = err
		}
	}
	return first
}

// unseal prepares an active segment that Open found exactly as a clean
// close sealed it for its first append since: it cuts that seal off the
// time index, durably (one truncate and one fdatasync, once), since the
// seal says where the data ends. Called with Log.wmu held.
func (s *segment) unseal() error {
	s.ix.Lock()
	defer s.ix.Unlock()
	if !s.index.sealTail {
		return nil
	}
	if err := s.index.cutSealTail(); err != nil {
		return fmt.Errorf("storage: %s: cut the seal of the last close: %w", s.path(timeIndexSuffix), err)
	}
	return nil
}

// readHeader reads the batch header at pos (holding offset want),
// checking framing, magic and base offset only.
func (s *segment) readHeader(pos, want, limit int64) (batch.Header, error) {
	var h batch.Header
	err := s.walkHeaders(pos, want, limit, func(_ int64, hh batch.Header) bool { h = hh; return false })
	return h, err
}

// headerBlock is how much walkHeaders reads at once: a few headers of small
// batches, or one header of a big one, per positional read.
const headerBlock = 8 << 10

// walkHeaders calls fn with the position and header of each batch from pos
// (a batch boundary holding offset want) until fn returns false or limit is
// reached, stepping over quarantined ranges. Headers are checked for
// framing, magic and the offset sequence only; one that fails is a damage
// report (a *CorruptionError, see asDamage).
func (s *segment) walkHeaders(pos, want, limit int64, fn func(int64, batch.Header) bool) error {
	from, fromWant := pos, want
	damage := func(pos, want int64, why string) error {
		ce := s.damage(pos, want, why)
		ce.from, ce.fromWant = from, fromWant
		return ce
	}
	var buf [headerBlock]byte
	var bstart, bend int64 // file range held in buf
	for pos < limit {
		if r, ok := s.quarantinedAt(pos); ok {
			pos, want = r.end, r.last+1
			continue
		}
		if limit-pos < batch.HeaderSize {
			return damage(pos, want, fmt.Sprintf("%d bytes left, header needs %d", limit-pos, batch.HeaderSize))
		}
		if pos < bstart || pos+batch.HeaderSize > bend {
			n := min(int64(len(buf)), limit-pos)
			if m, err := s.log.ReadAt(buf[:n], pos); err != nil && int64(m) < n {
				return s.readErr(pos, err)
			}
			bstart, bend = pos, pos+n
		}
		h, _ := batch.ParseHeader(buf[pos-bstart : bend-bstart])
		if h.Magic != batch.Magic || h.BatchLength < batch.HeaderSize-batch.LengthSize || pos+h.Size() > limit {
			return damage(pos, want, fmt.Sprintf("bad header (magic %d, length %d) at end %d", h.Magic, h.BatchLength, limit))
		}
		if !s.follows(h.BaseOffset, want) {
			return damage(pos, want, fmt.Sprintf("base offset %d, want %d", h.BaseOffset, want))
		}
		if !fn(pos, h) {
			return nil
		}
		pos, want = pos+h.Size(), h.NextOffset()
	}
	return nil
}

// readErr maps a failed positional read: a segment deleted under the reader
// means the offset is gone, a closed log is closed, anything else is an I/O
// error.
func (s *segment) readErr(pos int64, err error) error {
	if s.deleted.Load() {
		return fmt.Errorf("storage: segment %d deleted: %w", s.base, ErrOffsetOutOfRange)
	}
	if errors.Is(err, errFileGone) {
		return fmt.Errorf("storage: read %s: %w", s.path(logSuffix), ErrClosed)
	}
	return fmt.Errorf("storage: read %s at %d: %w", s.path(logSuffix), pos, err)
}

// maxDistrust bounds how many index entries one lookup may find wrong and
// drop before it gives up (each costs a walk from an earlier entry).
const maxDistrust = 64

// find returns the position and header of the batch containing offset, or
// of the first batch after it when offset is in a quarantined range;
// found=false if the segment's readable bytes end before it. An index entry
// is used only if the batch header it points at agrees with it; one that
// does not is dropped and the walk starts from the entry before, so that
// damage is only ever concluded from a walk that reached it through good
// batches.
func (s *segment) find(offset, limit int64) (pos int64, h batch.Header, found bool, err error) {
	for range maxDistrust {
		start, want, err := s.lookupOffset(offset)
		if err != nil {
			return 0, h, false, err
		}
		found = false
		err = s.walkHeaders(start, want, limit, func(p int64, hh batch.Header) bool {
			pos, h, found = p, hh, hh.LastOffset() >= offset
			return !found
		})
		if ce, ok := asDamage(err); ok && ce.Position == start && start > 0 && s.distrust(start) {
			continue
		}
		return pos, h, found && err == nil, err
	}
	return 0, h, false, fmt.Errorf("storage: index of %s disagrees with the segment too often", s.path(logSuffix))
}
