package storage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// The quarantine list.
//
// Each log keeps its damaged byte ranges in a small file, quarantine.json,
// rewritten whole (a temporary file, fsync, rename, fsync of the directory)
// each time it changes, so a crash leaves the old list or the new one. Its
// content is protected by a CRC-32C: a list whose bytes are damaged is
// ignored (and logged), never trusted, since a wrong range would hide good
// batches; the damage it listed is then found again by reads and the scrub.
//
//	{"version":1,
//	 "batches":[{"segment":"00000000000000000000.log","position":4096,"length":1130,
//	             "first_offset":40,"last_offset":49,"found_ms":1767225600000,
//	             "reason":"damaged batch: batch: corrupt record batch: crc 5e1c09a2, computed 0c7a3b11"}],
//	 "crc32c":2561346701}
//
// crc32c is the CRC-32C (Castagnoli) of the "batches" array exactly as
// encoded in the file. Ranges are sorted by segment and position and never
// overlap; last_offset < first_offset means the range holds no offsets.

const (
	quarantineFile = "quarantine.json"
	quarantineTmp  = quarantineFile + ".tmp"
)

// QuarantinedBatch is a damaged byte range the log no longer serves:
// readers see its offsets as a gap.
type QuarantinedBatch struct {
	Segment     string    // path of the segment file
	Position    int64     // byte position of the damaged batch in Segment
	Length      int64     // bytes quarantined, up to the next valid batch
	FirstOffset int64     // first offset the range held
	LastOffset  int64     // last offset it held (FirstOffset-1: none)
	Found       time.Time // when this process or an earlier one found it
	Reason      string    // what was wrong with the first batch
}

// qrange is a quarantined range of one segment: bytes [pos, end) held
// offsets [first, last].
type qrange struct{ pos, end, first, last int64 }

// qentry is one range as stored in the file.
type qentry struct {
	Segment     string `json:"segment"`
	Position    int64  `json:"position"`
	Length      int64  `json:"length"`
	FirstOffset int64  `json:"first_offset"`
	LastOffset  int64  `json:"last_offset"`
	FoundMS     int64  `json:"found_ms"`
	Reason      string `json:"reason"`
}

type qfile struct {
	Version int             `json:"version"`
	Batches json.RawMessage `json:"batches"`
	CRC     uint32          `json:"crc32c"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeQuarantine is the file's bytes for entries.
func encodeQuarantine(entries []qentry) []byte {
	if entries == nil {
		entries = []qentry{}
	}
	b, _ := json.Marshal(entries) // plain structs: cannot fail
	out, _ := json.Marshal(qfile{Version: 1, Batches: b, CRC: crc32.Checksum(b, castagnoli)})
	return append(out, '\n')
}

// decodeQuarantine parses a quarantine file, refusing anything that is not
// exactly a valid list: bad JSON, another version, a CRC that does not
// match, a range that makes no sense or overlaps another.
func decodeQuarantine(b []byte) ([]qentry, error) {
	var f qfile
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&f); err != nil {
		return nil, fmt.Errorf("storage: quarantine list: %w", err)
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("storage: quarantine list: version %d", f.Version)
	}
	if got := crc32.Checksum(f.Batches, castagnoli); got != f.CRC {
		return nil, fmt.Errorf("storage: quarantine list: crc %08x, computed %08x", f.CRC, got)
	}
	var entries []qentry
	d = json.NewDecoder(bytes.NewReader(f.Batches))
	d.DisallowUnknownFields()
	if err := d.Decode(&entries); err != nil {
		return nil, fmt.Errorf("storage: quarantine list: %w", err)
	}
	for i, e := range entries {
		if _, ok := parseSegmentName(e.Segment, logSuffix); !ok || e.Position < 0 || e.Length <= 0 ||
			e.Position > 1<<62 || e.Length > 1<<62 || e.FirstOffset < 0 || e.LastOffset < e.FirstOffset-1 {
			return nil, fmt.Errorf("storage: quarantine list: bad entry %d", i)
		}
		if i > 0 {
			p := entries[i-1]
			if p.Segment > e.Segment || (p.Segment == e.Segment && p.Position+p.Length > e.Position) {
				return nil, fmt.Errorf("storage: quarantine list: entry %d out of order", i)
			}
		}
	}
	return entries, nil
}

// quarantine is a log's list of damaged ranges and their file.
type quarantine struct {
	fs     vfs.FS
	dir    string
	files  *FileCache
	logger *slog.Logger
	obs    Observer
	now    func() time.Time

	mu      sync.Mutex
	entries []qentry
}

// load reads the list, if names (the directory's) hold one. A list that
// cannot be read or trusted is logged and ignored.
func (q *quarantine) load(names []string) error {
	if slices.Contains(names, quarantineTmp) {
		q.fs.Remove(filepath.Join(q.dir, quarantineTmp)) // an update cut short
	}
	if !slices.Contains(names, quarantineFile) {
		return nil
	}
	var b []byte
	err := q.files.withFile(q.fs, filepath.Join(q.dir, quarantineFile), func(f vfs.File) error {
		var err error
		b, err = readFileAll(f)
		return err
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("storage: read quarantine list: %w", err)
	}
	entries, err := decodeQuarantine(b)
	if err != nil {
		q.logger.Error("storage: quarantine list damaged; ignored, its ranges will be found again", "dir", q.dir, "err", err)
		return nil
	}
	q.entries = entries
	return nil
}

// attach gives each segment its ranges, dropping entries that no longer fit
// a segment (it was deleted or cut), and rewrites the list if any were.
func (q *quarantine) attach(segs []*segment) {
	q.mu.Lock()
	defer q.mu.Unlock()
	bySeg := map[string]*segment{}
	for _, s := range segs {
		bySeg[segmentName(s.base, logSuffix)] = s
	}
	kept := q.entries[:0:0]
	for _, e := range q.entries {
		if s := bySeg[e.Segment]; s != nil && e.Position+e.Length <= s.size.Load() {
			kept = append(kept, e)
		}
	}
	changed := len(kept) != len(q.entries)
	q.entries = kept
	for _, s := range segs {
		q.publishLocked(s)
	}
	if len(kept) > 0 {
		q.logger.Warn("storage: log has quarantined batches; their offsets are skipped", "dir", q.dir, "batches", len(kept))
	}
	if changed {
		q.persistLocked()
	}
}

// publishLocked rebuilds s's ranges from the entries. Called with q.mu held.
func (q *quarantine) publishLocked(s *segment) {
	name := segmentName(s.base, logSuffix)
	var rs []qrange
	for _, e := range q.entries {
		if e.Segment == name {
			rs = append(rs, qrange{pos: e.Position, end: e.Position + e.Length, first: e.FirstOffset, last: e.LastOffset})
		}
	}
	if rs == nil {
		s.qr.Store(nil)
		return
	}
	s.qr.Store(&rs)
}

// add quarantines r of s, unless a range overlapping it is already
// listed: the damage is then already known. The first report of a range
// is logged at error level, counted, and written to the list.
func (q *quarantine) add(s *segment, r qrange, reason string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	name := segmentName(s.base, logSuffix)
	e := qentry{Segment: name, Position: r.pos, Length: r.end - r.pos, FirstOffset: r.first, LastOffset: r.last,
		FoundMS: q.now().UnixMilli(), Reason: reason}
	i := sort.Search(len(q.entries), func(i int) bool {
		x := q.entries[i]
		return x.Segment > name || (x.Segment == name && x.Position+x.Length > r.pos)
	})
	if i < len(q.entries) && q.entries[i].Segment == name && q.entries[i].Position < r.end {
		return false
	}
	q.entries = slices.Insert(q.entries, i, e)
	q.publishLocked(s)
	q.files.corrupt.Add(1)
	if o, ok := q.obs.(CorruptionObserver); ok {
		o.ObserveCorruptBatch()
	}
	q.logger.Error("storage: damaged batch quarantined; its offsets are skipped", "segment", s.path(logSuffix),
		"position", r.pos, "bytes", r.end-r.pos, "first_offset", r.first, "last_offset", r.last, "reason", reason)
	q.persistLocked()
	return true
}

// forget drops the ranges of s at or after pos (the segment was cut there,
// or deleted: pos 0).
func (q *quarantine) forget(s *segment, pos int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	name := segmentName(s.base, logSuffix)
	kept := q.entries[:0:0]
	for _, e := range q.entries {
		if e.Segment != name || e.Position < pos {
			kept = append(kept, e)
		}
	}
	if len(kept) == len(q.entries) {
		return
	}
	q.entries = kept
	q.publishLocked(s)
	q.persistLocked()
}

// list returns the ranges as the API reports them.
func (q *quarantine) list() []QuarantinedBatch {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]QuarantinedBatch, len(q.entries))
	for i, e := range q.entries {
		out[i] = QuarantinedBatch{Segment: filepath.Join(q.dir, e.Segment), Position: e.Position, Length: e.Length,
			FirstOffset: e.FirstOffset, LastOffset: e.LastOffset, Found: time.UnixMilli(e.FoundMS).UTC(), Reason: e.Reason}
	}
	return out
}

// persistLocked writes the list crash-atomically. A failure is logged: the
// ranges stay quarantined in memory, and after a restart the damage is
// found again. Called with q.mu held.
func (q *quarantine) persistLocked() {
	if err := q.write(); err != nil {
		q.logger.Error("storage: cannot write quarantine list; it stays in memory", "dir", q.dir, "err", err)
	}
}

func (q *quarantine) write() error {
	path, tmp := filepath.Join(q.dir, quarantineFile), filepath.Join(q.dir, quarantineTmp)
	if len(q.entries) == 0 {
		err := q.fs.Remove(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		return q.fs.SyncDir(q.dir)
	}
	f, err := q.files.create(q.fs, tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(encodeQuarantine(q.entries))
	if err == nil {
		err = f.Sync()
	}
	f.drop()
	if err == nil {
		err = q.fs.Rename(tmp, path)
	}
	if err == nil {
		err = q.fs.SyncDir(q.dir)
	}
	if err != nil {
		q.fs.Remove(tmp)
	}
	return err
}

// readFileAll reads a whole small file.
func readFileAll(f vfs.File) ([]byte, error) {
	n, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	if m, err := f.ReadAt(b, 0); err != nil && int64(m) != n {
		return nil, fmt.Errorf("storage: read %s: %w", f.Name(), err)
	}
	return b, nil
}

// quarantinedAt returns the quarantined range that starts at pos, if any.
func (s *segment) quarantinedAt(pos int64) (qrange, bool) {
	p := s.qr.Load()
	if p == nil {
		return qrange{}, false
	}
	rs := *p
	i := sort.Search(len(rs), func(i int) bool { return rs[i].pos >= pos })
	if i < len(rs) && rs[i].pos == pos {
		return rs[i], true
	}
	return qrange{}, false
}

// nextQuarantined returns the first quarantined range starting at or after
// pos, if any.
func (s *segment) nextQuarantined(pos int64) (qrange, bool) {
	p := s.qr.Load()
	if p == nil {
		return qrange{}, false
	}
	rs := *p
	i := sort.Search(len(rs), func(i int) bool { return rs[i].pos >= pos })
	if i < len(rs) {
		return rs[i], true
	}
	return qrange{}, false
}
