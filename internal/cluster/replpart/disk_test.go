package replpart

import (
	"log/slog"
	"math/rand/v2"

	"github.com/sluice-mq/sluice/internal/cluster/engine"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/raftstore"
	"github.com/sluice-mq/sluice/internal/storage"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// disk is a node's Raft storage across kills.
type disk interface {
	engine() (multiraft.Engine, error) // after a crash: a new one, from what the disk kept
	crash() error                      // a power cut: every unsynced write is lost
}

type memDisk struct{ eng *multiraft.MemEngine }

func newMemDisk(multiraft.NodeID) disk               { return &memDisk{eng: multiraft.NewMemEngine()} }
func (d *memDisk) engine() (multiraft.Engine, error) { return d.eng, nil }
func (d *memDisk) crash() error                      { return d.eng.Crash() }

// storeDisk is raftstore (the production storage, through internal/cluster/engine) on a
// crashable in-memory file system: a crash keeps synced bytes plus maybe a torn prefix of
// what was in flight.
type storeDisk struct {
	node multiraft.NodeID
	rng  *rand.Rand
	mem  *vfs.MemFS
	eng  *engine.Engine
}

func newStoreDisk(id multiraft.NodeID) disk {
	return &storeDisk{node: id, rng: rand.New(rand.NewPCG(uint64(id), 1)), mem: vfs.NewMem()}
}

func (d *storeDisk) engine() (multiraft.Engine, error) {
	if d.eng != nil {
		return d.eng, nil
	}
	e, err := engine.Open(engine.Options{Node: d.node, Store: raftstore.Options{FS: d.mem, Dir: "raft", SegmentBytes: 16 << 10,
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
		_ = d.eng.Close() // after the cut: its files are gone
	}
	d.eng = nil
	return nil
}
