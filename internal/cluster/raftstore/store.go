package raftstore

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/internal/storage"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// ErrClosed: the store or the group was closed.
var ErrClosed = errors.New("raftstore: closed")

// Options configure a Store. Zero values take the defaults listed.
type Options struct {
	FS  vfs.FS // default vfs.Default
	Dir string // required: the node's Raft directory, one subdirectory per group

	// SegmentBytes is the size at which a group's log rolls to a new
	// segment; compaction deletes whole segments, so it is also how much
	// compacted log a group may keep on disk. Default 64 MiB.
	SegmentBytes int64
	// PreallocateBytes: see storage.Options. Default 0 (off).
	PreallocateBytes int64
	// MaxEntryBytes is the largest entry data accepted. Default 8 MiB.
	MaxEntryBytes int
	// SyncConcurrency bounds how many groups one Sync makes durable at
	// once (each a goroutine issuing its own fdatasyncs). Default 64.
	SyncConcurrency int
	// DeleteInBackground makes Compact return once the state file says where
	// the log now starts (durable), and delete the segments below on a
	// goroutine of the group's: on ext4 unlinking a 16 MiB segment and
	// syncing the directory took 10-20 ms under load, in the Ready loop of
	// every group of the node. Safe to defer: a segment below first is never
	// read and recovery skips it. Default off (inline).
	DeleteInBackground bool
	// Files is the descriptor cache the groups' logs share; default
	// storage.DefaultFileCache().
	Files *storage.FileCache

	Now    func() time.Time // default time.Now
	Logger *slog.Logger     // default slog.Default()
	// Observer, if set, hears of every fdatasync: the groups' logs' (with
	// storage's commit batches) and the HardState log's (its batch: how
	// many groups one fdatasync covered).
	Observer storage.Observer
}

func (o *Options) setDefaults() error {
	if o.Dir == "" {
		return fmt.Errorf("raftstore: Options.Dir is required")
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = 64 << 20
	}
	if o.MaxEntryBytes <= 0 {
		o.MaxEntryBytes = 8 << 20
	}
	if o.SyncConcurrency <= 0 {
		o.SyncConcurrency = 64
	}
	if o.Files == nil {
		o.Files = storage.DefaultFileCache()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

// Store is a node's Raft storage: the groups it holds replicas of, and the
// Sync that makes many groups' writes durable together.
type Store struct {
	opts Options

	wal *hsWAL
	seq atomic.Uint64 // the last HardState sequence number handed out

	mu     sync.Mutex
	groups map[uint64]*Group
	closed bool
}

// nextSeq numbers a HardState; seen keeps the counter above seq, one read
// from a group's state file.
func (s *Store) nextSeq() uint64 { return s.seq.Add(1) }

func (s *Store) seen(seq uint64) {
	for {
		cur := s.seq.Load()
		if cur >= seq || s.seq.CompareAndSwap(cur, seq) {
			return
		}
	}
}

// Open opens (creating if needed) the node's Raft directory. Groups are
// opened one by one with Group; GroupIDs lists those on disk.
func Open(opts Options) (*Store, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	if err := vfs.MkdirAllDurable(opts.FS, opts.Dir); err != nil {
		return nil, fmt.Errorf("raftstore: open %s: %w", opts.Dir, err)
	}
	if err := removeLeftovers(opts.FS, opts.Dir); err != nil {
		return nil, err
	}
	w, err := openWAL(opts.FS, opts.Dir, opts.Observer)
	if err != nil {
		return nil, err
	}
	s := &Store{opts: opts, wal: w, groups: map[uint64]*Group{}}
	s.seq.Store(w.maxSeq)
	return s, nil
}

// groupDirName is g followed by the id in 20 digits, so List sorts by id.
func groupDirName(id uint64) string { return fmt.Sprintf("g%020d", id) }

// GroupIDs lists the groups that have a directory, in id order.
func (s *Store) GroupIDs() ([]uint64, error) {
	names, err := s.opts.FS.List(s.opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("raftstore: list %s: %w", s.opts.Dir, err)
	}
	var ids []uint64
	for _, n := range names {
		d, ok := strings.CutPrefix(n, "g")
		if !ok || len(d) != 20 {
			continue
		}
		if id, err := strconv.ParseUint(d, 10, 64); err == nil {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// Group opens the group id, creating it empty if it has no directory yet,
// and recovers it (open.go). Opening a group that is open returns it.
func (s *Store) Group(id uint64) (*Group, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if g, ok := s.groups[id]; ok {
		return g, nil
	}
	g, err := openGroup(s, id, filepath.Join(s.opts.Dir, groupDirName(id)))
	if err != nil {
		return nil, err
	}
	s.groups[id] = g
	return g, nil
}

// removedSuffix marks a group directory being removed: renamed first, so
// that removal is all or nothing, then deleted. Open finishes what a crash
// interrupted.
const removedSuffix = ".removed"

// newSuffix marks a group directory being created (Group.create).
const newSuffix = ".new"

// RemoveGroup deletes group id from this node: its log, state and
// snapshot, closing it first if it is open. Durable when it returns: the
// node then holds no replica of the group, and Group(id) starts a new,
// empty one (a replica added again after a remove-node, which must never
// vote with the old one's term and vote).
func (s *Store) RemoveGroup(id uint64) error {
	s.mu.Lock()
	g := s.groups[id]
	s.mu.Unlock()
	if g != nil {
		g.Close() // a failed group's log reports its failure again; it goes anyway
	}
	dir := filepath.Join(s.opts.Dir, groupDirName(id))
	if _, err := s.opts.FS.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	trash := dir + removedSuffix
	if err := vfs.RemoveAll(s.opts.FS, trash); err != nil {
		return fmt.Errorf("raftstore: remove group %d: %w", id, err)
	}
	if err := s.opts.FS.Rename(dir, trash); err != nil {
		return fmt.Errorf("raftstore: remove group %d: %w", id, err)
	}
	if err := s.opts.FS.SyncDir(s.opts.Dir); err != nil {
		return fmt.Errorf("raftstore: remove group %d: %w", id, err)
	}
	if err := vfs.RemoveAll(s.opts.FS, trash); err != nil {
		return fmt.Errorf("raftstore: remove group %d: %w", id, err)
	}
	return s.opts.FS.SyncDir(s.opts.Dir)
}

// removeLeftovers deletes the directories of removals a crash cut short.
func removeLeftovers(fsys vfs.FS, dir string) error {
	names, err := fsys.List(dir)
	if err != nil {
		return fmt.Errorf("raftstore: list %s: %w", dir, err)
	}
	for _, n := range names {
		if strings.HasSuffix(n, removedSuffix) || strings.HasSuffix(n, newSuffix) {
			if err := vfs.RemoveAll(fsys, filepath.Join(dir, n)); err != nil {
				return fmt.Errorf("raftstore: finish removing %s: %w", n, err)
			}
		}
	}
	return nil
}

// forget drops a closed group from the open set.
func (s *Store) forget(g *Group) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.groups[g.id] == g {
		delete(s.groups, g.id)
	}
}

// Close closes every open group. Writes not yet made durable by Sync may
// or may not survive (Close does not sync state files).
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	gs := make([]*Group, 0, len(s.groups))
	for _, g := range s.groups {
		gs = append(gs, g)
	}
	s.mu.Unlock()
	var errs []error
	for _, g := range gs {
		if err := g.Close(); err != nil && !errors.Is(err, ErrClosed) {
			errs = append(errs, err)
		}
	}
	if err := s.wal.close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
