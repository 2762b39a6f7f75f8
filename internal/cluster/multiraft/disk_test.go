package multiraft_test

import (
	"log/slog"
	"math/rand/v2"
	"sync"

	"github.com/sluice-mq/sluice/internal/cluster/engine"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/raftstore"
	"github.com/sluice-mq/sluice/internal/storage"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// disk is a test node's storage, which outlives its host: a kill or a power cut keeps what
// it synced, a wipe loses everything.
type disk interface {
	// engine is the engine to start a host on; after a crash or a wipe it is a new one,
	// recovered from what the disk kept.
	engine() (multiraft.Engine, error)
	// crash is a power cut: the host is gone, and so is every write not synced.
	crash() error
	// wipe replaces the disk by an empty one (the node lost its disk).
	wipe()
	// armCut makes the disk die after n more writes (the memory engine: its next sync
	// fails): the node is then cut off at that point, inside a round.
	armCut(n int)
	// cut reports whether an armed cut has fired since the disk was last crashed.
	cut() bool
	// disarm drops an armed cut that has not fired.
	disarm()
}

// memDisk is multiraft's MemEngine.
type memDisk struct{ eng *multiraft.MemEngine }

func newMemDisk(multiraft.NodeID) disk { return &memDisk{eng: multiraft.NewMemEngine()} }

func (d *memDisk) engine() (multiraft.Engine, error) { return d.eng, nil }
func (d *memDisk) crash() error                      { return d.eng.Crash() }
func (d *memDisk) wipe()                             { d.eng = multiraft.NewMemEngine() }
func (d *memDisk) armCut(int)                        { d.eng.FailNextSync() }
func (d *memDisk) cut() bool                         { return false } // ProcessReady reports it
func (d *memDisk) disarm()                           { d.eng.ClearSyncFailures() }

// storeDisk is raftstore on a crashable in-memory file system, through an ErrorFS that
// can kill the disk at any write: the node runs on the real durable storage, and a power
// cut (vfs.MemFS.CrashWithTornWrites) leaves what a real disk could: synced bytes, plus
// maybe a torn prefix of what was in flight.
type storeDisk struct {
	node  multiraft.NodeID
	rng   *rand.Rand
	mem   *vfs.MemFS
	efs   *vfs.ErrorFS
	eng   *engine.Engine
	mu    sync.Mutex // guards left and fired: the store writes from several goroutines
	left  int        // writes until the armed cut; < 0: none armed
	fired bool       // the cut fired: every write since failed
}

func newStoreDisk(seed int64) func(multiraft.NodeID) disk {
	return func(id multiraft.NodeID) disk {
		return &storeDisk{node: id, rng: rand.New(rand.NewPCG(uint64(seed), uint64(id))), mem: vfs.NewMem(), left: -1}
	}
}

// mutating is what a dead disk refuses. Reads keep working: raft treats a failed read of
// its log as fatal (it panics), and a power cut stops the node before it reads again.
func mutating(op vfs.Op) bool {
	switch op {
	case vfs.OpCreate, vfs.OpRemove, vfs.OpRename, vfs.OpMkdirAll, vfs.OpSyncDir,
		vfs.OpWrite, vfs.OpSync, vfs.OpTruncate:
		return true
	}
	return false
}

func (d *storeDisk) engine() (multiraft.Engine, error) {
	if d.eng != nil {
		return d.eng, nil
	}
	d.efs = vfs.NewErrorFS(d.mem)
	d.efs.Inject(vfs.Fault{Err: multiraft.ErrInjectedSync, Match: func(op vfs.Op, _ string) bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.left < 0 || !mutating(op) {
			return false
		}
		if d.left == 0 {
			d.fired = true
			return true
		}
		d.left--
		return false
	}})
	e, err := engine.Open(engine.Options{Node: d.node, Store: raftstore.Options{FS: d.efs, Dir: "raft", SegmentBytes: 16 << 10,
		// No background scrub: nothing may touch the disk behind the schedule's back.
		Files:  storage.NewFileCache(storage.FileCacheOptions{MaxOpen: 64, ScrubBytesPerSec: -1}),
		Logger: slog.New(slog.DiscardHandler)}})
	if err != nil {
		return nil, err
	}
	d.eng = e
	return e, nil
}

func (d *storeDisk) crash() error {
	d.mem.CrashWithTornWrites(d.rng)
	if d.eng != nil {
		_ = d.eng.Close() // after the cut: its files are gone (vfs.ErrCrashed)
	}
	d.eng = nil
	d.reset()
	return nil
}

func (d *storeDisk) wipe() {
	if d.eng != nil {
		_ = d.eng.Close()
	}
	d.mem, d.eng = vfs.NewMem(), nil
	d.reset()
}

func (d *storeDisk) reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.left, d.fired = -1, false
}

func (d *storeDisk) armCut(n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.left < 0 && !d.fired {
		d.left = n
	}
}

func (d *storeDisk) cut() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.fired
}

func (d *storeDisk) disarm() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.fired {
		d.left = -1
	}
}
