package producer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"sync"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// ID is an idempotent producer's identity: Kafka's producer id and
// epoch. Batches carry both, with a per-partition sequence number.
type ID struct {
	ID    int64
	Epoch int16
}

// IDs allocates producer ids durably, in producers.json:
//
//	{"reserved": N, "named": {"<name>": {"ID": id, "Epoch": e}}}
//
// Unnamed ids are handed out from a block reserved on disk ahead of use, so
// most Init calls write nothing; after a crash the rest of the
// block is skipped, never reused. A named producer (Kafka's transactional
// id, the native API's producer_name) keeps its id and gets the next epoch
// on each init, which fences the previous instance.
type IDs struct {
	fs  vfs.FS
	dir string

	mu       sync.Mutex // guards next, reserved, named, retired and epochs, and serialises file writes
	next     int64
	reserved int64
	named    map[string]ID
	// retired: the last epoch of each id a name no longer holds (forgotten,
	// or replaced past the last epoch). Kept on disk so that a zombie of
	// such an id stays fenced across restarts, not only until the next one.
	retired map[int64]int16
	epochs  map[int64]int16 // current epoch of each named or retired id
	// retiredCap is maxRetired (smaller in tests).
	retiredCap int
}

const (
	producersFile  = "producers.json"
	pidReserveStep = 1000
)

type producersDisk struct {
	Reserved int64           `json:"reserved"`
	Named    map[string]ID   `json:"named"`
	Retired  map[int64]int16 `json:"retired,omitempty"`
}

// OpenIDs reads dir's producers.json (none yet: no id handed out).
func OpenIDs(fsys vfs.FS, dir string) (*IDs, error) {
	p := &IDs{fs: fsys, dir: dir, named: map[string]ID{}, retired: map[int64]int16{}, epochs: map[int64]int16{},
		retiredCap: maxRetired}
	buf, err := vfs.ReadFile(fsys, filepath.Join(dir, producersFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return p, nil
	case err != nil:
		return nil, fmt.Errorf("producer ids: %w", err)
	}
	var d producersDisk
	if err := json.Unmarshal(buf, &d); err != nil {
		return nil, fmt.Errorf("producer ids: %s is corrupt: %w", producersFile, err)
	}
	p.next, p.reserved = d.Reserved, d.Reserved
	if d.Named != nil {
		p.named = d.Named
	}
	if d.Retired != nil {
		p.retired = d.Retired
	}
	for id, epoch := range p.retired {
		p.epochs[id] = epoch
	}
	for _, pid := range p.named {
		p.epochs[pid.ID] = pid.Epoch
	}
	return p, nil
}

// persistLocked writes the file. Called with mu held.
func (p *IDs) persistLocked(reserved int64, named map[string]ID) error {
	return p.persistAllLocked(reserved, named, p.retired)
}

func (p *IDs) persistAllLocked(reserved int64, named map[string]ID, retired map[int64]int16) error {
	buf, err := json.Marshal(producersDisk{Reserved: reserved, Named: named, Retired: retired})
	if err != nil {
		return err
	}
	return vfs.WriteFileAtomic(p.fs, p.dir, producersFile, buf)
}

// allocLocked returns a fresh id, reserving a block on disk when needed.
func (p *IDs) allocLocked() (int64, error) {
	if p.next >= p.reserved {
		if err := p.persistLocked(p.next+pidReserveStep, p.named); err != nil {
			return 0, err
		}
		p.reserved = p.next + pidReserveStep
	}
	id := p.next
	p.next++
	return id, nil
}

// Init allocates an id for an idempotent producer. name "" gets a fresh
// id with epoch 0. A name (Kafka's transactional id) keeps its id across
// calls and bumps its epoch, so batches of the previous instance are
// refused with ErrFenced. Durable before it returns.
func (p *IDs) Init(name string) (ID, error) {
	return p.InitAbove(name, -1)
}

// InitAbove is Init for a named producer whose epoch may have moved on
// without this file (Kafka's transaction coordinator bumps it at every
// transaction, KIP-890 part 2, and keeps it in its own log): the next
// epoch is above both the one here and floor, or, past the last epoch, a
// fresh id at epoch 0.
func (p *IDs) InitAbove(name string, floor int16) (ID, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if name == "" {
		id, err := p.allocLocked()
		return ID{ID: id}, err
	}
	cur, ok := p.named[name]
	cur.Epoch = max(cur.Epoch, floor)
	next := ID{ID: cur.ID, Epoch: cur.Epoch + 1}
	if !ok || cur.Epoch == math.MaxInt16 {
		id, err := p.allocLocked()
		if err != nil {
			return ID{}, err
		}
		next = ID{ID: id}
	}
	named := maps.Clone(p.named)
	named[name] = next
	retired, dropped := p.retired, []int64(nil)
	if ok && next.ID != cur.ID {
		retired, dropped = retiring(p.retired, cur, p.retiredCap)
	}
	if err := p.persistAllLocked(p.reserved, named, retired); err != nil {
		return ID{}, err
	}
	p.named, p.retired = named, retired
	for _, id := range dropped {
		delete(p.epochs, id)
	}
	p.epochs[next.ID] = next.Epoch
	return next, nil
}

// Forget removes a named producer (an expired transactional id), durably:
// its next Init gets a fresh id at epoch 0. Its id stays fenced at the
// epoch it had, across restarts too.
func (p *IDs) Forget(name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	cur, ok := p.named[name]
	if !ok {
		return nil
	}
	named := maps.Clone(p.named)
	delete(named, name)
	retired, dropped := retiring(p.retired, cur, p.retiredCap)
	if err := p.persistAllLocked(p.reserved, named, retired); err != nil {
		return err
	}
	p.named, p.retired = named, retired
	for _, id := range dropped {
		delete(p.epochs, id)
	}
	return nil
}

// maxRetired bounds the retired ids kept: one entry (a dozen bytes of
// JSON, written with every change of the file) per transactional id that
// expired or ran out of epochs, and an application that makes a new
// transactional id per task or checkpoint (Flink's Kafka sink does) would
// grow the file without end. Past the bound the oldest ids (the lowest:
// ids are handed out in order) are dropped: a zombie of one of them, more
// than maxRetired retirements later, is fenced by its partitions'
// sequence state alone, as in Kafka after the id's expiry.
const maxRetired = 10_000

// retiring returns a copy of retired with id's last epoch added, the
// oldest dropped past limit (and which those were).
func retiring(retired map[int64]int16, id ID, limit int) (map[int64]int16, []int64) {
	out := maps.Clone(retired)
	if out == nil {
		out = map[int64]int16{}
	}
	out[id.ID] = id.Epoch
	var dropped []int64
	if len(out) > limit {
		dropped = slices.Sorted(maps.Keys(out))[:len(out)-limit]
		for _, old := range dropped {
			delete(out, old)
		}
	}
	return out, dropped
}

// Check refuses a batch from an id never allocated, or from an epoch older
// than a named producer's current one (a zombie whose successor has not yet
// written to this partition).
func (p *IDs) Check(id int64, epoch int16) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if id < 0 || id >= p.reserved {
		return fmt.Errorf("%w: %d", ErrUnknownID, id)
	}
	if cur, ok := p.epochs[id]; ok && epoch < cur {
		return fmt.Errorf("%w: producer %d epoch %d, current %d", ErrFenced, id, epoch, cur)
	}
	return nil
}
