package txn

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// fakeEffects records what the coordinator asked for.
type fakeEffects struct {
	mu      sync.Mutex
	epochs  map[string]Producer
	next    int64
	markers []marker
	offsets []Offset
	fail    error // WriteMarkers fails with it while set
}

type marker struct {
	pid    int64
	epoch  int16
	commit bool
	parts  []Partition
}

func (f *fakeEffects) InitProducer(id string, floor int16) (int64, int16, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.epochs == nil {
		f.epochs = map[string]Producer{}
	}
	p, ok := f.epochs[id]
	p.Epoch = max(p.Epoch, floor)        // producer.IDs.InitAbove
	if !ok || p.Epoch == math.MaxInt16 { // producer.IDs' overflow: a new id
		p = Producer{ID: f.next, Epoch: 0}
		f.next++
	} else {
		p.Epoch++
	}
	f.epochs[id] = p
	return p.ID, p.Epoch, nil
}

func (f *fakeEffects) WriteMarkers(m Marker, parts []Partition) error {
	pid, epoch, commit := m.ProducerID, m.Epoch, m.Commit
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.markers = append(f.markers, marker{pid, epoch, commit, parts})
	return nil
}

func (f *fakeEffects) ForgetProducer(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.epochs, id)
	return nil
}

func (f *fakeEffects) CommitOffsets(o []Offset) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.offsets = append(f.offsets, o...)
	return nil
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func open(t *testing.T, fsys vfs.FS, fx *fakeEffects, ck *clock) *Coordinator {
	t.Helper()
	c, err := Open(Config{FS: fsys, Dir: "/data", Now: ck.now, Effects: fx, MaxTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func newMem(t *testing.T) *vfs.MemFS {
	m := vfs.NewMem()
	if err := vfs.MkdirAllDurable(m, "/data"); err != nil {
		t.Fatal(err)
	}
	return m
}

// failKth makes the k-th write, sync, rename, directory sync, create or
// truncate through efs fail, a write half done (3 bytes of it), whichever
// goroutine makes it.
func failKth(efs *vfs.ErrorFS, k int) {
	var mu sync.Mutex
	n := 0
	efs.Inject(vfs.Fault{Op: vfs.OpAny, Count: 1, ShortWrite: 3, Match: func(op vfs.Op, _ string) bool {
		mu.Lock()
		defer mu.Unlock()
		switch op {
		case vfs.OpWrite, vfs.OpSync, vfs.OpRename, vfs.OpSyncDir, vfs.OpCreate, vfs.OpTruncate:
			n++
			return n == k
		}
		return false
	}})
}
