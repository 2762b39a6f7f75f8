package raftstore

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/internal/storage"
	"github.com/sluice-mq/sluice/internal/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
)

// The HardState log: one file per node, shared by every group, where Sync
// appends the HardState of each group whose HardState changed and makes
// them all durable with one fdatasync. A per-group state file replaced at
// every commit cost two fsyncs and a rename per group per round (836
// entries/s over 100 groups against 8,838 without it: docs/benchmarks.md,
// "Raft storage"); the shared log costs one fdatasync per round whatever
// the number of groups.
//
//	hardstate.wal: | record | record | …   each 44 bytes:
//	               | crc32c 4 | group 8 | seq 8 | term 8 | vote 8 | commit 8 |
//
// The CRC covers the 40 bytes after it. seq orders a group's HardStates
// across this file and the group's state file (which keeps the seq of the
// HardState it holds): at Open the higher one wins. A torn or damaged
// record ends the file (records are fixed-size, so nothing after a damaged
// one is trusted). At open, and whenever the file passes its limit, it is
// rewritten atomically with only the newest record of each group, so it
// stays about 44 bytes per group.
const (
	walFile    = "hardstate.wal"
	walRecSize = 44
)

// walMinLimit is the smallest size that triggers a rewrite (tests lower
// it to rewrite often).
var walMinLimit int64 = 1 << 20

type walRec struct {
	group, seq uint64
	hs         pb.HardState
	// must: the record changes the group's durable term or vote, which raft needs on
	// disk before the messages that depend on them leave (not encoded)
	must bool
}

func (r walRec) append(b []byte) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	for _, v := range []uint64{r.group, r.seq, r.hs.Term, r.hs.Vote, r.hs.Commit} {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	binary.BigEndian.PutUint32(b[start:], crc32.Checksum(b[start+4:], castagnoli))
	return b
}

// decodeWAL returns the records of b up to the first damaged one.
func decodeWAL(b []byte) []walRec {
	var out []walRec
	be := binary.BigEndian
	for ; len(b) >= walRecSize; b = b[walRecSize:] {
		if crc32.Checksum(b[4:walRecSize], castagnoli) != be.Uint32(b) {
			break
		}
		out = append(out, walRec{group: be.Uint64(b[4:]), seq: be.Uint64(b[12:]),
			hs: pb.HardState{Term: be.Uint64(b[20:]), Vote: be.Uint64(b[28:]), Commit: be.Uint64(b[36:])}})
	}
	return out
}

type hsWAL struct {
	fs   vfs.FS
	dir  string
	obs  storage.Observer // may be nil
	mu   sync.Mutex       // guards the fields below and serializes writes
	f    vfs.File
	size int64
	// limit is the size that triggers a rewrite: at least walMinLimit and
	// twice the last rewrite, so rewriting costs O(1) per record.
	limit  int64
	latest map[uint64]walRec // newest durable record per group
	maxSeq uint64
	failed error // an fdatasync failed: nothing more is written
}

// openWAL reads the file, then rewrites it with the newest record of each
// group: that drops a torn tail before anything is appended after it.
func openWAL(fsys vfs.FS, dir string, obs storage.Observer) (*hsWAL, error) {
	w := &hsWAL{fs: fsys, dir: dir, obs: obs, latest: map[uint64]walRec{}}
	b, err := vfs.ReadFile(fsys, filepath.Join(dir, walFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("raftstore: %w", err)
	}
	for _, r := range decodeWAL(b) {
		if r.seq > w.latest[r.group].seq {
			w.latest[r.group] = r
		}
		w.maxSeq = max(w.maxSeq, r.seq)
	}
	if err := w.rewrite(); err != nil {
		return nil, err
	}
	return w, nil
}

// rewrite replaces the file with the newest record of each group. Called
// with mu held (or before w is shared).
func (w *hsWAL) rewrite() error {
	recs := make([]walRec, 0, len(w.latest))
	for _, r := range w.latest {
		recs = append(recs, r)
	}
	slices.SortFunc(recs, func(a, b walRec) int { return cmp.Compare(a.group, b.group) })
	buf := make([]byte, 0, len(recs)*walRecSize)
	for _, r := range recs {
		buf = r.append(buf)
	}
	if err := vfs.WriteFileAtomic(w.fs, w.dir, walFile, buf); err != nil {
		return fmt.Errorf("raftstore: rewrite %s: %w", walFile, err)
	}
	if w.f != nil {
		w.f.Close()
	}
	f, err := w.fs.OpenAppend(filepath.Join(w.dir, walFile))
	if err != nil {
		w.f = nil
		return fmt.Errorf("raftstore: open %s: %w", walFile, err)
	}
	w.f, w.size, w.limit = f, int64(len(buf)), max(walMinLimit, 2*int64(len(buf)))
	return nil
}

// write appends recs and, if sync, fdatasyncs once: when it returns nil,
// every one of them is durable. Without sync they are only written: a
// crash keeps any prefix of them (records are fixed-size and checked, so
// a torn one ends the file at open), and the next synced write or rewrite
// covers them; until then latest (what a rewrite keeps) does not hold
// them. Any failure is final for the file (fsyncgate; a failed write may
// have left part of a record): the store must be reopened; except a write
// the disk had no room for (ENOSPC, EDQUOT), which is cut back off the file
// and returned as it is, so the same records can be written again once
// there is room (a rewrite that finds no room keeps the current file, whose
// records are durable, and is tried again at a later write).
func (w *hsWAL) write(recs []walRec, sync bool) error {
	if len(recs) == 0 {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed != nil {
		return w.failed
	}
	if w.f == nil {
		return ErrClosed
	}
	buf := make([]byte, 0, len(recs)*walRecSize)
	for _, r := range recs {
		buf = r.append(buf)
	}
	// A write that takes the file past its limit is synced whatever it holds: the rewrite
	// after it keeps only durable records, and without it a file of commit-only records
	// would grow for as long as no term or vote changes.
	sync = sync || w.size+int64(len(buf)) > w.limit
	if _, err := w.f.Write(buf); err != nil {
		err = fmt.Errorf("raftstore: append %s: %w", walFile, err)
		if vfs.NoSpace(err) && w.f.Truncate(w.size) == nil {
			return err // nothing of recs is in the file: written again later
		}
		w.failed = err
		return w.failed
	}
	w.size += int64(len(buf))
	if !sync {
		return nil // (a rewrite waits for a synced write: it keeps durable records only)
	}
	began := time.Now()
	if err := w.f.Sync(); err != nil {
		w.failed = fmt.Errorf("raftstore: fdatasync %s: %w", walFile, err)
		return w.failed
	}
	if w.obs != nil {
		w.obs.ObserveFsync(time.Since(began))
		w.obs.ObserveCommitBatch(len(recs))
	}
	for _, r := range recs {
		if r.seq > w.latest[r.group].seq {
			w.latest[r.group] = r
		}
	}
	if w.size > w.limit {
		if err := w.rewrite(); err != nil && !(vfs.NoSpace(err) && w.f != nil) {
			w.failed = err // the records above are durable; later ones are not written
		}
	}
	return nil
}

// newest returns the newest durable record of group id, if any.
func (w *hsWAL) newest(id uint64) (walRec, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.latest[id]
	return r, ok
}

func (w *hsWAL) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}
