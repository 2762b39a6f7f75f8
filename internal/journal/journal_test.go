package journal

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"

	"github.com/sluice-mq/sluice/internal/storage"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// counter is the simplest state machine: the events it applied, in order.
// Its snapshot is the decimal count; events are their own decimal index.
type counter struct{ applied []int }

func (c *counter) loader() Loader {
	return Loader{
		Restore: func(body []byte) error {
			n, err := strconv.Atoi(string(body))
			c.applied = make([]int, n)
			for i := range c.applied {
				c.applied[i] = i
			}
			return err
		},
		Apply: func(_ int64, v []byte) error {
			n, err := strconv.Atoi(string(v))
			if err == nil {
				c.applied = append(c.applied, n)
			}
			return err
		},
	}
}

func openJournal(t *testing.T, fsys vfs.FS, every int) (*Journal, *counter) {
	t.Helper()
	log, syncEach, err := OpenLog(storage.Options{FS: fsys, Dir: "/j/journal", SegmentBytes: 4 << 10,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	c := &counter{}
	n, err := Load(fsys, "/j", log, c.loader())
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return Start(log, n, Options{SyncEach: syncEach, Snapshots: SnapshotPolicy{FS: fsys, Dir: "/j", Every: every}}), c
}

// checkPrefix: what a load rebuilt is 0, 1, 2, … with nothing missing, and
// holds at least every event acknowledged.
func checkPrefix(t *testing.T, c *counter, acked int) {
	t.Helper()
	for i, v := range c.applied {
		if v != i {
			t.Fatalf("event %d replayed as %d: %v", i, v, c.applied)
		}
	}
	if len(c.applied) < acked {
		t.Fatalf("replayed %d events, but %d were acknowledged", len(c.applied), acked)
	}
}

// Every event acknowledged survives a power cut at any point, with a
// snapshot and a journal cut under way, and a load rebuilds a gap-free
// prefix of what was submitted.
func TestCrashKeepsWhatWasAcknowledged(t *testing.T) {
	for round := range 20 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			mem := vfs.NewMem()
			if err := vfs.MkdirAllDurable(mem, "/j"); err != nil {
				t.Fatal(err)
			}
			j, _ := openJournal(t, mem, 25)
			var mu sync.Mutex // orders submissions, as an owner's lock does
			// acked: every event below it is durable (the journal writes in
			// order, so an event's ack vouches for all before it).
			next, acked, ackedAtCrash := 0, 0, 0
			var wg sync.WaitGroup
			var clone *vfs.MemFS
			for w := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 30 {
						mu.Lock()
						n := next
						next++
						ch := j.Record([][]byte{[]byte(strconv.Itoa(n))}, func() ([]byte, error) {
							return []byte(strconv.Itoa(n + 1)), nil
						})
						mu.Unlock()
						if err := <-ch; err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						acked = max(acked, n+1)
						if w == round%4 && i == round && clone == nil {
							clone = mem.CrashClone() // the power cut, mid-load
							ackedAtCrash = acked
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			j.Close()
			_, c := openJournal(t, clone, 25)
			checkPrefix(t, c, ackedAtCrash)
			_, c = openJournal(t, mem, 25)
			checkPrefix(t, c, acked)
			if len(c.applied) != 120 {
				t.Fatalf("after a clean close: %d events, want 120", len(c.applied))
			}
		})
	}
}

// A failed write fails its submitters and every later one, so the journal
// never holds an event whose predecessor was lost; Reset (after the owner
// reloaded) lets submissions through again.
func TestWriteFailureIsSticky(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.NewMem())
	j, _ := openJournal(t, efs, 1000)
	defer j.Close()
	if err := <-j.Submit([][]byte{[]byte("0")}); err != nil {
		t.Fatal(err)
	}
	efs.Inject(vfs.Fault{Op: vfs.OpWrite, Count: 1})
	if err := <-j.Submit([][]byte{[]byte("1")}); err == nil {
		t.Fatal("a failed write was acknowledged")
	}
	if err := <-j.Submit([][]byte{[]byte("1")}); err == nil {
		t.Fatal("a submission after a failed write was acknowledged before Reset")
	}
	c := &counter{}
	n, err := Load(efs, "/j", j.Log(), c.loader())
	if err != nil {
		t.Fatal(err)
	}
	j.Reset(n)
	if err := <-j.Submit([][]byte{[]byte(strconv.Itoa(len(c.applied)))}); err != nil {
		t.Fatalf("after Reset: %v", err)
	}
	c = &counter{}
	if _, err := Load(efs, "/j", j.Log(), c.loader()); err != nil {
		t.Fatal(err)
	}
	checkPrefix(t, c, 2)
}

// A snapshot lets the journal below it go, and a load starts from it.
func TestSnapshotBoundsReplay(t *testing.T) {
	mem := vfs.NewMem()
	j, _ := openJournal(t, mem, 100)
	for n := range 1000 {
		ch := j.Record([][]byte{[]byte(strconv.Itoa(n))}, func() ([]byte, error) { return []byte(strconv.Itoa(n + 1)), nil })
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	j, c := openJournal(t, mem, 100)
	defer j.Close()
	checkPrefix(t, c, 1000)
	if len(c.applied) != 1000 {
		t.Fatalf("%d events, want 1000", len(c.applied))
	}
	if start := j.Log().LogStartOffset(); start == 0 {
		t.Fatal("the journal was never cut below a snapshot")
	}
}

// A damaged snapshot is reported, never half-trusted; a journal cut past
// the snapshot it needs is refused.
func TestLoadRefusesWhatItCannotTrust(t *testing.T) {
	mem := vfs.NewMem()
	if err := vfs.MkdirAllDurable(mem, "/j"); err != nil {
		t.Fatal(err)
	}
	good := FrameSnapshot(7, []byte("7"))
	bad := append([]byte(nil), good...)
	bad[len(bad)-1] ^= 1
	if err := vfs.WriteFileAtomic(mem, "/j", SnapshotFile, bad); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := LoadSnapshot(mem, "/j"); !errors.Is(err, ErrSnapshotDamaged) {
		t.Fatalf("damaged snapshot: %v", err)
	}
	if _, _, err := UnframeSnapshot(good[:5]); !errors.Is(err, ErrSnapshotDamaged) {
		t.Fatalf("short snapshot: %v", err)
	}
	// A snapshot at 7 over an empty journal whose start is 0 is fine; over
	// a journal starting after 7 it is not.
	if err := vfs.WriteFileAtomic(mem, "/j", SnapshotFile, good); err != nil {
		t.Fatal(err)
	}
	log, _, err := OpenLog(storage.Options{FS: mem, Dir: "/j/journal", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	c := &counter{}
	if _, err := Load(mem, "/j", log, c.loader()); err != nil || len(c.applied) != 7 {
		t.Fatalf("load over the snapshot: %v, %d events", err, len(c.applied))
	}
}
