package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/storage"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// counter is the simplest state machine: the events it applied, in order.
// Its snapshot is the decimal count; events are their own decimal index.
type counter struct {
	applied []int
	loaded  Loaded
}

func (c *counter) loader() Loader {
	return Loader{
		Reset: func() error { c.applied = nil; return nil },
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
	loaded, err := Load(fsys, "/j", log, c.loader())
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	c.loaded = loaded
	return Start(log, loaded, Options{SyncEach: syncEach, Snapshots: SnapshotPolicy{FS: fsys, Dir: "/j", Every: every}}), c
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
						ch := j.Record([][]byte{[]byte(strconv.Itoa(n))}, atOnce(func() ([]byte, error) {
							return []byte(strconv.Itoa(n + 1)), nil
						}))
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
	c := resetAfterFailure(t, efs, j)
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
		ch := j.Record([][]byte{[]byte(strconv.Itoa(n))}, atOnce(func() ([]byte, error) { return []byte(strconv.Itoa(n + 1)), nil }))
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
		waitIdleSnapshot(t, j) // as fillJournal: a snapshot every 100 events
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

// fillJournal records n events with a snapshot every `every`, then closes.
func fillJournal(t *testing.T, fsys vfs.FS, n, every int) {
	t.Helper()
	j, _ := openJournal(t, fsys, every)
	for i := range n {
		ch := j.Record([][]byte{[]byte(strconv.Itoa(i))}, atOnce(func() ([]byte, error) { return []byte(strconv.Itoa(i + 1)), nil }))
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
		// A snapshot is encoded and written aside; while one is under way no other is
		// taken. Waiting for it keeps the snapshots at every multiple of every, which the
		// tests of damaged snapshots count on (two of them at the end).
		waitIdleSnapshot(t, j)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

func flipByte(t *testing.T, fsys vfs.FS, path string, at int) {
	t.Helper()
	data, err := vfs.ReadFile(fsys, path)
	if err != nil {
		t.Fatal(err)
	}
	data[at%len(data)] ^= 0x40
	if err := vfs.WriteFileAtomic(fsys, "/j", filepath.Base(path), data); err != nil {
		t.Fatal(err)
	}
}

// One flipped byte anywhere in the newest snapshot costs nothing: the
// previous snapshot and the journal after it (which is cut only below the
// previous one) rebuild the same state, and the damage is reported.
func TestDamagedSnapshotCostsNothing(t *testing.T) {
	for _, at := range []int{0, 5, 9, 11, 12, 13, 1 << 20} {
		t.Run(strconv.Itoa(at), func(t *testing.T) {
			mem := vfs.NewMem()
			fillJournal(t, mem, 1000, 100)
			flipByte(t, mem, "/j/snapshot", at)
			j, c := openJournal(t, mem, 100)
			defer j.Close()
			checkPrefix(t, c, 1000)
			if len(c.applied) != 1000 || c.loaded.PassedOver == nil || c.loaded.Degraded {
				t.Fatalf("%d events, passed over %v, degraded %v: want all 1000 from the previous snapshot",
					len(c.applied), c.loaded.PassedOver, c.loaded.Degraded)
			}
		})
	}
}

// With both snapshots damaged the owner is rebuilt from the journal alone,
// onto an empty state, and Load says so (Degraded) instead of failing: one
// owner's bad luck must not keep a broker from starting.
func TestBothSnapshotsDamagedDegrades(t *testing.T) {
	mem := vfs.NewMem()
	fillJournal(t, mem, 1000, 100)
	flipByte(t, mem, "/j/snapshot", 20)
	flipByte(t, mem, "/j/snapshot.1", 20)
	j, c := openJournal(t, mem, 100)
	defer j.Close()
	if !c.loaded.Degraded || c.loaded.PassedOver == nil {
		t.Fatalf("loaded %+v, want degraded with the reasons", c.loaded)
	}
	start := j.Log().LogStartOffset()
	if len(c.applied) != 1000-int(start) || c.applied[0] != int(start) {
		t.Fatalf("rebuilt %d events from %v, want the journal's %d from %d", len(c.applied), c.applied[:1], 1000-start, start)
	}
}

// A crash between moving the current snapshot aside and writing the new
// one leaves only the previous snapshot, which the journal still continues.
func TestCrashBetweenSnapshotRenameAndWrite(t *testing.T) {
	mem := vfs.NewMem()
	fillJournal(t, mem, 1000, 100)
	if err := mem.Rename("/j/snapshot", "/j/snapshot.1"); err != nil {
		t.Fatal(err)
	}
	j, c := openJournal(t, mem, 100)
	defer j.Close()
	checkPrefix(t, c, 1000)
	if len(c.applied) != 1000 || c.loaded.PassedOver != nil || c.loaded.Degraded {
		t.Fatalf("%d events, %+v: want all 1000, nothing passed over", len(c.applied), c.loaded)
	}
}

// The checksum covers the position: a flip there is damage, not a jump.
// The first framing (checksum over the body only) is still read.
func TestSnapshotFraming(t *testing.T) {
	framed := FrameSnapshot(7, []byte("seven"))
	for i := range framed {
		bad := append([]byte(nil), framed...)
		bad[i] ^= 1
		if _, _, err := UnframeSnapshot(bad); !errors.Is(err, ErrSnapshotDamaged) {
			t.Fatalf("flip at byte %d not caught: %v", i, err)
		}
	}
	legacy := binary.BigEndian.AppendUint64(nil, 7)
	legacy = binary.BigEndian.AppendUint32(legacy, crc32.Checksum([]byte("seven"), crcTable))
	legacy = append(legacy, "seven"...)
	if pos, body, err := UnframeSnapshot(legacy); err != nil || pos != 7 || string(body) != "seven" {
		t.Fatalf("legacy framing: %d %q %v", pos, body, err)
	}
}

// FuzzUnframeSnapshot: no input panics, and whatever unframes frames back
// to something that unframes the same.
func FuzzUnframeSnapshot(f *testing.F) {
	f.Add(FrameSnapshot(7, []byte("seven")))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		pos, body, err := UnframeSnapshot(data)
		if err != nil {
			return
		}
		p2, b2, err := UnframeSnapshot(FrameSnapshot(pos, body))
		if err != nil || p2 != pos || string(b2) != string(body) {
			t.Fatalf("re-framed %d %q: %d %q %v", pos, body, p2, b2, err)
		}
	})
}

// A journal at rest costs no goroutine: the writer ends after writerIdle
// with nothing to write, and the next submission starts another.
func TestIdleWriterEnds(t *testing.T) {
	defer func(d time.Duration) { writerIdle = d }(writerIdle)
	writerIdle = 20 * time.Millisecond
	j, _ := openJournal(t, vfs.NewMem(), 1000)
	defer j.Close()
	running := func() bool { j.mu.Lock(); defer j.mu.Unlock(); return j.running }
	if running() {
		t.Fatal("a writer runs before any work")
	}
	for round := range 3 {
		if err := <-j.Submit([][]byte{[]byte(strconv.Itoa(round))}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for running() && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if running() {
			t.Fatalf("round %d: the writer still runs after %v idle", round, writerIdle)
		}
	}
	c := &counter{}
	if _, err := Load(vfs.NewMem(), "/none", j.Log(), c.loader()); err != nil || len(c.applied) != 3 {
		t.Fatalf("replayed %v %v, want the 3 events", c.applied, err)
	}
}

// A damaged last batch of the journal (nothing readable after it) costs
// its events; Load replays the rest instead of failing with "no progress".
func TestDamagedLastJournalBatch(t *testing.T) {
	mem := vfs.NewMem()
	fillJournal(t, mem, 50, 1000) // no snapshot: everything is in the journal
	segs, err := mem.List("/j/journal")
	if err != nil {
		t.Fatal(err)
	}
	var seg string
	for _, n := range segs {
		if strings.HasSuffix(n, ".log") {
			seg = "/j/journal/" + n
		}
	}
	data, err := vfs.ReadFile(mem, seg)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-2] ^= 0x10 // inside the last batch's last record
	if err := vfs.WriteFileAtomic(mem, "/j/journal", filepath.Base(seg), data); err != nil {
		t.Fatal(err)
	}
	j, c := openJournal(t, mem, 1000)
	defer j.Close()
	if len(c.applied) == 0 || len(c.applied) >= 50 {
		t.Fatalf("replayed %d events, want those before the damaged last batch", len(c.applied))
	}
	checkPrefix(t, c, 0)
}

// A snapshot pending when a write fails is given up, and once the owner has reset the
// journal, snapshots are taken again (before, the failed write dropped the snapshot's
// completion and the journal never took another: it grew without bound).
func TestSnapshotsResumeAfterAWriteFailure(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.NewMem())
	j, _ := openJournal(t, efs, 1)
	defer j.Close()
	if err := <-j.Record([][]byte{[]byte("0")}, atOnce(func() ([]byte, error) { return []byte("1"), nil })); err != nil {
		t.Fatal(err)
	}
	waitIdleSnapshot(t, j)
	efs.Inject(vfs.Fault{Op: vfs.OpWrite, Count: 1})
	if err := <-j.Record([][]byte{[]byte("1")}, atOnce(func() ([]byte, error) { return []byte("2"), nil })); err == nil {
		t.Fatal("a failed write was acknowledged")
	}
	c := resetAfterFailure(t, efs, j)
	n := len(c.applied)
	// The snapshot the failed write's event asked for may still be encoding (on a loaded
	// machine): while it is, no event takes another. Wait for it, and for each one after,
	// so that every event below takes one (CI once saw none taken after the Reset).
	waitIdleSnapshot(t, j)
	for i := n; i < n+3; i++ {
		if err := <-j.Record([][]byte{[]byte(strconv.Itoa(i))}, atOnce(func() ([]byte, error) { return []byte(strconv.Itoa(i + 1)), nil })); err != nil {
			t.Fatalf("after Reset: %v", err)
		}
		waitIdleSnapshot(t, j)
	}
	c = &counter{}
	loaded, err := Load(efs, "/j", j.Log(), c.loader())
	if err != nil {
		t.Fatal(err)
	}
	if loaded.At < int64(n+1) {
		t.Fatalf("after Reset the newest snapshot is at %d; events %d–%d were recorded since, a snapshot each", loaded.At, n, n+2)
	}
}

// waitIdleSnapshot waits until no snapshot of j is under way.
func waitIdleSnapshot(t *testing.T, j *Journal) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		j.mu.Lock()
		busy := j.snap.busy
		j.mu.Unlock()
		if !busy {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("a snapshot is still under way after 10 s")
		}
	}
}

// blockedCapture is a Capture whose encoding waits for release: the owner's state is
// the count n at capture, encoded as the counter's snapshot.
func blockedCapture(n int, encoding chan<- struct{}, release <-chan struct{}) Capture {
	return func() func() ([]byte, error) {
		return func() ([]byte, error) {
			encoding <- struct{}{}
			<-release
			return []byte(strconv.Itoa(n)), nil
		}
	}
}

// A snapshot's encoding runs beside the journal: while it is under way, later events are
// written and acknowledged; the snapshot written after it is the state at its capture;
// Close waits for it, so a snapshot taken at shutdown is kept.
func TestSnapshotEncodedAside(t *testing.T) {
	mem := vfs.NewMem()
	j, _ := openJournal(t, mem, 5)
	encoding, release := make(chan struct{}), make(chan struct{})
	for n := range 4 {
		if err := <-j.Record([][]byte{[]byte(strconv.Itoa(n))}, atOnce(func() ([]byte, error) {
			return []byte(strconv.Itoa(n + 1)), nil
		})); err != nil {
			t.Fatal(err)
		}
	}
	recorded := make(chan (<-chan error), 1)
	go func() { recorded <- j.Record([][]byte{[]byte("4")}, blockedCapture(5, encoding, release)) }()
	select {
	case ch := <-recorded:
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Record waited for the snapshot's encoding")
	}
	<-encoding
	for n := 5; n < 12; n++ { // acknowledged while the encoding waits
		if err := <-j.Record([][]byte{[]byte(strconv.Itoa(n))}, atOnce(func() ([]byte, error) {
			t.Error("a second snapshot taken while one was under way")
			return nil, nil
		})); err != nil {
			t.Fatal(err)
		}
	}
	closed := make(chan error)
	go func() { closed <- j.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a snapshot was being encoded", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	j, c := openJournal(t, mem, 5)
	defer j.Close()
	if c.loaded.At != 5 {
		t.Fatalf("restored the snapshot at %d, want the one captured at 5", c.loaded.At)
	}
	checkPrefix(t, c, 12)
	if len(c.applied) != 12 || c.loaded.Replayed != 7 {
		t.Fatalf("%d events, %d replayed; want 12 and 7", len(c.applied), c.loaded.Replayed)
	}
}

// A snapshot captured before a write failure and encoded after the owner reset the journal
// is dropped: its state may hold events the failed write lost, whose offsets later events
// now take.
func TestSnapshotCapturedBeforeAResetIsDropped(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.NewMem())
	j, _ := openJournal(t, efs, 1)
	defer j.Close()
	if err := <-j.Submit([][]byte{[]byte("0")}); err != nil {
		t.Fatal(err)
	}
	efs.Inject(vfs.Fault{Op: vfs.OpWrite, Count: 1})
	encoding, release := make(chan struct{}), make(chan struct{})
	// A state of 2 events (the owner's memory ran ahead) captured at 1, then the write of
	// event 1 fails. (Captured before the submission, so that the failure cannot come
	// first and skip the snapshot.)
	j.MaybeSnapshot(0, 1, blockedCapture(2, encoding, release))
	<-encoding
	if err := <-j.Submit([][]byte{[]byte("1")}); err == nil {
		t.Fatal("a failed write was acknowledged")
	}
	resetAfterFailure(t, efs, j)
	if err := <-j.Submit([][]byte{[]byte("1"), []byte("2")}); err != nil { // the owner, rebuilt, goes on
		t.Fatal(err)
	}
	close(release)
	waitIdleSnapshot(t, j)
	if err := <-j.Submit([][]byte{[]byte("3")}); err != nil {
		t.Fatal(err)
	}
	c := &counter{}
	loaded, err := Load(efs, "/j", j.Log(), c.loader())
	if err != nil {
		t.Fatal(err)
	}
	if loaded.At != 0 {
		t.Fatalf("a snapshot captured before the reset was written at %d", loaded.At)
	}
	checkPrefix(t, c, 4)
}

// atOnce is the Capture of an owner that encodes its snapshot under its lock.
func atOnce(snapshot func() ([]byte, error)) Capture {
	return func() func() ([]byte, error) {
		body, err := snapshot()
		return func() ([]byte, error) { return body, err }
	}
}

// resetAfterFailure is what an owner does after a failed write: it reloads its state from
// what the journal holds and resets the journal.
func resetAfterFailure(t *testing.T, fsys vfs.FS, j *Journal) *counter {
	t.Helper()
	c := &counter{}
	loaded, err := Load(fsys, "/j", j.Log(), c.loader())
	if err != nil {
		t.Fatal(err)
	}
	j.Reset(loaded)
	return c
}

// Close while owners record and a snapshot is taken after every event: Close returns
// (it waits for the encodings under way), submissions after it are refused, and what was
// acknowledged is there at the next load. (The window Close's closing flag shuts, a
// snapshot started between its Wait and closed, is too narrow for this test to hit.)
func TestCloseDuringSnapshots(t *testing.T) {
	mem := vfs.NewMem()
	j, _ := openJournal(t, mem, 1)
	var mu sync.Mutex
	next, acked := 0, 0
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for {
				mu.Lock()
				n := next
				next++
				ch := j.Record([][]byte{[]byte(strconv.Itoa(n))}, atOnce(func() ([]byte, error) {
					return []byte(strconv.Itoa(n + 1)), nil
				}))
				mu.Unlock()
				if err := <-ch; err != nil {
					return // closed
				}
				mu.Lock()
				acked = max(acked, n+1)
				mu.Unlock()
			}
		})
	}
	time.Sleep(20 * time.Millisecond)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	j, c := openJournal(t, mem, 1)
	defer j.Close()
	checkPrefix(t, c, acked)
}
