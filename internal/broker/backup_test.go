package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// backupLedger is what clients were told before the backup's instant:
// messages whose send returned, acks that returned, records whose produce
// returned. Each entry is recorded under mu only while taken is false, and
// the backup is taken holding mu, so every entry happened before it.
type backupLedger struct {
	mu       sync.Mutex
	taken    bool
	sent     map[string]bool  // queue bodies whose Send returned
	acked    map[string]bool  // queue bodies whose Ack returned
	acking   map[string]bool  // queue bodies whose Ack was called (it may be in the backup)
	produced map[int64]string // topic offset -> value, produce returned
	clone    *vfs.MemFS       // the backup
}

func (l *backupLedger) record(fn func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.taken {
		fn()
	}
}

// A live backup taken as a file-system snapshot (LVM, ZFS, btrfs, a cloud
// volume snapshot: every file at one instant, what had reached the disk)
// restores to a broker that has every message whose send was acknowledged
// before the snapshot, never delivers one whose ack was acknowledged
// before it, and has every record produced before it at its offset: the
// promise of docs/operations.md, "Backup and restore". The snapshot is
// MemFS.CrashClone, taken while senders, a receiver that acks and a
// producer run; it keeps only what was synced, the worst a snapshot of a
// disk with a volatile cache can hold. Bounded: 600 sends, 300 produces.
func TestLiveSnapshotBackupRestores(t *testing.T) {
	fsys := vfs.NewMem()
	clock := newClock()
	b, err := Open(Options{Dir: "/data", FS: fsys, Now: clock.Now, Logger: quietLogger(), SnapshotEvery: 40,
		HeadroomBytes: testHeadroom, SegmentBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.CreateQueue(QueueSettings{Name: "jobs"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateTopic(TopicSettings{Name: "events", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	l := &backupLedger{sent: map[string]bool{}, acked: map[string]bool{}, acking: map[string]bool{}, produced: map[int64]string{}}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	const senders, perSender, produces = 3, 200, 1000
	for s := range senders {
		wg.Go(func() {
			for i := range perSender {
				body := fmt.Sprintf("m-%d-%d", s, i)
				if _, err := b.Send(ctx, "jobs", []SendInput{{Body: []byte(body)}}); err != nil {
					t.Errorf("send: %v", err)
					return
				}
				l.record(func() { l.sent[body] = true })
			}
		})
	}
	wg.Go(func() {
		for i := range produces {
			v := fmt.Sprintf("r-%d", i)
			res, err := b.Produce(ctx, "events", []ProduceRecord{{Value: []byte(v)}}, ProduceOptions{})
			if err != nil {
				t.Errorf("produce: %v", err)
				return
			}
			l.record(func() { l.produced[res[0].Offset] = v })
		}
	})
	done := make(chan struct{})
	var acker sync.WaitGroup
	acker.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			ds, err := b.Receive(ctx, "jobs", ReceiveOptions{Max: 7, Wait: 10 * time.Millisecond})
			if err != nil {
				t.Errorf("receive: %v", err)
				return
			}
			// Ack most, leave some in flight: the snapshot must hold
			// both kinds.
			for j, d := range ds {
				if j%3 == 2 {
					continue
				}
				l.record(func() { l.acking[string(d.Body)] = true })
				if err := b.Ack(ctx, "jobs", d.Receipt); err != nil {
					t.Errorf("ack: %v", err)
					return
				}
				l.record(func() { l.acked[string(d.Body)] = true })
			}
		}
	})
	// Take the backup in the middle of the load.
	for {
		l.mu.Lock()
		if len(l.sent) >= senders*perSender/2 && len(l.produced) >= produces/2 {
			l.taken = true
			l.clone = fsys.CrashClone()
			l.mu.Unlock()
			break
		}
		l.mu.Unlock()
		time.Sleep(time.Millisecond)
		if ctx.Err() != nil {
			t.Fatal("load too slow to reach the backup point")
		}
	}
	wg.Wait()
	close(done)
	acker.Wait()
	if t.Failed() {
		return
	}
	t.Logf("backup taken after %d sends, %d acks, %d produces were acknowledged", len(l.sent), len(l.acked), len(l.produced))
	checkRestoredBackup(t, l)
}

// checkRestoredBackup opens the backup as a restored broker an hour later
// (every lease expired) and checks the ledger against it.
func checkRestoredBackup(t *testing.T, l *backupLedger) {
	t.Helper()
	clock := newClock()
	clock.Advance(time.Hour)
	r, err := Open(Options{Dir: "/data", FS: l.clone, Now: clock.Now, Logger: quietLogger(), HeadroomBytes: testHeadroom})
	if err != nil {
		t.Fatalf("open the restored backup: %v", err)
	}
	defer r.Close()
	ctx := t.Context()
	delivered := map[string]bool{}
	for {
		ds, err := r.Receive(ctx, "jobs", ReceiveOptions{Max: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			body := string(d.Body)
			if l.acked[body] {
				t.Errorf("%s was acked before the backup and is delivered by the restore", body)
			}
			delivered[body] = true
			if err := r.Ack(ctx, "jobs", d.Receipt); err != nil {
				t.Fatal(err)
			}
		}
	}
	for body := range l.sent {
		// An ack called before the backup and answered after it may
		// be in it: only a message nobody had begun to ack must be there.
		if !delivered[body] && !l.acking[body] {
			t.Errorf("%s was sent (acknowledged) before the backup, no ack had begun, and it is missing from the restore", body)
		}
	}
	fr, err := r.Fetch(ctx, "events", 0, 0, FetchOptions{MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]string{}
	for off := int64(0); off < fr.HighWatermark; {
		fr, err := r.Fetch(ctx, "events", 0, off, FetchOptions{MaxBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		recs, err := decodeRecords(fr.Batches)
		if err != nil || len(recs) == 0 {
			t.Fatalf("fetch events at %d: %d records, %v", off, len(recs), err)
		}
		for _, rec := range recs {
			got[rec.Offset] = string(rec.Value)
			off = rec.Offset + 1
		}
	}
	for off, v := range l.produced {
		if got[off] != v {
			t.Errorf("events offset %d: restore has %q, produced %q before the backup", off, got[off], v)
		}
	}
}
