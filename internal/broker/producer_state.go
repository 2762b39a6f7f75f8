package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"sync"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// ProducerID is an idempotent producer's identity: Kafka's producer id and
// epoch. Batches carry both, with a per-partition sequence number.
type ProducerID struct {
	ID    int64
	Epoch int16
}

// producerIDs allocates producer ids durably, in producers.json:
//
//	{"reserved": N, "named": {"<name>": {"ID": id, "Epoch": e}}}
//
// Unnamed ids are handed out from a block reserved on disk ahead of use, so
// most InitProducerID calls write nothing; after a crash the rest of the
// block is skipped, never reused. A named producer (Kafka's transactional
// id, the native API's producer_name) keeps its id and gets the next epoch
// on each init, which fences the previous instance.
type producerIDs struct {
	fs  vfs.FS
	dir string

	mu       sync.Mutex // guards next, reserved, named and epochs, and serialises file writes
	next     int64
	reserved int64
	named    map[string]ProducerID
	epochs   map[int64]int16 // current epoch of each named producer's id
}

const (
	producersFile  = "producers.json"
	pidReserveStep = 1000
)

type producersDisk struct {
	Reserved int64                 `json:"reserved"`
	Named    map[string]ProducerID `json:"named"`
}

func openProducerIDs(fsys vfs.FS, dir string) (*producerIDs, error) {
	p := &producerIDs{fs: fsys, dir: dir, named: map[string]ProducerID{}, epochs: map[int64]int16{}}
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
	for _, pid := range p.named {
		p.epochs[pid.ID] = pid.Epoch
	}
	return p, nil
}

// persistLocked writes the file. Called with mu held.
func (p *producerIDs) persistLocked(reserved int64, named map[string]ProducerID) error {
	buf, err := json.Marshal(producersDisk{Reserved: reserved, Named: named})
	if err != nil {
		return err
	}
	return vfs.WriteFileAtomic(p.fs, p.dir, producersFile, buf)
}

// allocLocked returns a fresh id, reserving a block on disk when needed.
func (p *producerIDs) allocLocked() (int64, error) {
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

// init allocates or bumps a producer id; see InitProducerID.
func (p *producerIDs) init(name string) (ProducerID, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if name == "" {
		id, err := p.allocLocked()
		return ProducerID{ID: id}, err
	}
	cur, ok := p.named[name]
	next := ProducerID{ID: cur.ID, Epoch: cur.Epoch + 1}
	if !ok || cur.Epoch == math.MaxInt16 {
		id, err := p.allocLocked()
		if err != nil {
			return ProducerID{}, err
		}
		next = ProducerID{ID: id}
	}
	named := make(map[string]ProducerID, len(p.named)+1)
	for k, v := range p.named {
		named[k] = v
	}
	named[name] = next
	if err := p.persistLocked(p.reserved, named); err != nil {
		return ProducerID{}, err
	}
	p.named = named
	p.epochs[next.ID] = next.Epoch
	return next, nil
}

// check refuses a batch from an id never allocated, or from an epoch older
// than a named producer's current one (a zombie whose successor has not yet
// written to this partition).
func (p *producerIDs) check(id int64, epoch int16) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if id < 0 || id >= p.reserved {
		return fmt.Errorf("%w: %d", ErrUnknownProducerID, id)
	}
	if cur, ok := p.epochs[id]; ok && epoch < cur {
		return fmt.Errorf("%w: producer %d epoch %d, current %d", ErrProducerFenced, id, epoch, cur)
	}
	return nil
}

// InitProducerID returns an id for an idempotent producer. name "" gets a
// fresh id with epoch 0. A name (Kafka's transactional id) keeps its id
// across calls and bumps its epoch, so batches of the previous instance are
// refused with ErrProducerFenced. Durable before it returns.
func (b *Broker) InitProducerID(name string) (ProducerID, error) {
	if b.streams == nil {
		return ProducerID{}, ErrClosed
	}
	return b.streams.pids.init(name)
}

// Kafka keeps the last five batches per producer and partition, because a
// producer may have at most five requests in flight: any retry is one of them.
const producerWindow = 5

// producerScanOffsets is how much of a partition's tail is scanned at open
// to rebuild producer state when there is no usable snapshot (see
// producer_snapshot.go). A producer whose last batch is older than that is
// forgotten; its next batch is then accepted whatever its sequence (as Kafka
// does once producer state expired), which only weakens duplicate detection
// for retries older than the window.
const producerScanOffsets = 4096

// seqRange is one stored batch of an idempotent producer.
type seqRange struct {
	first, last int32 // sequence numbers
	base        int64 // base offset in the log
}

type producerEntry struct {
	epoch  int16
	recent []seqRange // oldest first, at most producerWindow
}

// producerState is a partition's idempotent producers.
type producerState struct {
	// mu guards m. It is held across an idempotent append, so batches of one
	// producer reach the log in sequence order and a retry racing its
	// original finds it.
	mu      sync.Mutex
	m       map[int64]*producerEntry
	changed int   // batches recorded since the last snapshot
	snapAt  int64 // offset the last snapshot covers
}

func nextSeq(s int32) int32 {
	if s == math.MaxInt32 {
		return 0
	}
	return s + 1
}

func lastSeq(h batch.Header) int32 {
	return int32((int64(h.BaseSequence) + int64(h.LastOffsetDelta)) % (math.MaxInt32 + 1))
}

// checkLocked decides what to do with a batch: a duplicate of a stored one
// (returned), a new one (nil, nil) or a refusal. Called with mu held.
func (ps *producerState) checkLocked(h batch.Header) (*seqRange, error) {
	e := ps.m[h.ProducerID]
	switch {
	case e == nil:
		return nil, nil
	case h.ProducerEpoch < e.epoch:
		return nil, fmt.Errorf("%w: producer %d epoch %d, current %d", ErrProducerFenced, h.ProducerID, h.ProducerEpoch, e.epoch)
	case h.ProducerEpoch > e.epoch:
		if h.BaseSequence != 0 {
			return nil, fmt.Errorf("%w: producer %d new epoch %d starts at sequence %d, want 0", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
		}
		return nil, nil
	}
	for i := range e.recent {
		if r := e.recent[i]; r.first == h.BaseSequence && r.last == lastSeq(h) {
			return &r, nil
		}
	}
	if len(e.recent) > 0 {
		if want := nextSeq(e.recent[len(e.recent)-1].last); h.BaseSequence != want {
			return nil, fmt.Errorf("%w: producer %d sent sequence %d, want %d", ErrOutOfOrderSequence, h.ProducerID, h.BaseSequence, want)
		}
	}
	return nil, nil
}

// recordLocked notes a stored batch. Called with mu held.
func (ps *producerState) recordLocked(h batch.Header, base int64) {
	if ps.m == nil {
		ps.m = map[int64]*producerEntry{}
	}
	e := ps.m[h.ProducerID]
	if e == nil || h.ProducerEpoch != e.epoch {
		e = &producerEntry{epoch: h.ProducerEpoch}
		ps.m[h.ProducerID] = e
	}
	e.recent = append(e.recent, seqRange{first: h.BaseSequence, last: lastSeq(h), base: base})
	ps.changed++
	if len(e.recent) > producerWindow {
		e.recent = append(e.recent[:0], e.recent[len(e.recent)-producerWindow:]...)
	}
}
