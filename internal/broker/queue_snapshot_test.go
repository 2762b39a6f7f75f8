package broker

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/journal"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// Sends, receives and deletes run concurrently on one queue while its journal's snapshots
// (every 50 events) are encoded beside the queue's lock: after a restart and after a crash,
// no deleted message is delivered again and every other one is. Under -race the encoding
// reads only what the capture copied.
func TestQueueWorkDuringSnapshotEncoding(t *testing.T) {
	e := newEnv(t, nil) // SnapshotEvery 50
	e.createQueue(QueueSettings{Name: "q", VisibilityTimeout: time.Minute})
	ctx := context.Background()
	var mu sync.Mutex
	deleted, sent := map[string]bool{}, 0
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 60 {
				in := []SendInput{{Body: fmt.Appendf(nil, "w%d-%d-a", w, i)}, {Body: fmt.Appendf(nil, "w%d-%d-b", w, i)}}
				if _, err := e.b.Send(ctx, "q", in); err != nil {
					t.Error(err)
					return
				}
				ds, err := e.b.Receive(ctx, "q", ReceiveOptions{Max: 3})
				if err != nil {
					t.Error(err)
					return
				}
				for k, d := range ds {
					if k == 2 {
						continue // left in flight
					}
					if err := e.b.Ack(ctx, "q", d.Receipt); err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					deleted[string(d.Body)] = true
					mu.Unlock()
				}
			}
			mu.Lock()
			sent += 120
			mu.Unlock()
		})
	}
	wg.Wait()
	q, err := e.b.queue("q")
	if err != nil {
		t.Fatal(err)
	}
	e.restart() // Close waits for a snapshot being encoded, and writes it
	data, err := vfs.ReadFile(e.fs, filepath.Join(q.dir, journal.SnapshotFile))
	if err != nil {
		t.Fatalf("no queue journal snapshot was written: %v", err)
	}
	if at, _, err := journal.UnframeSnapshot(data); err != nil || at == 0 {
		t.Fatalf("the newest queue journal snapshot is at %d (%v)", at, err)
	}
	e.crash()
	e.clock.Advance(2 * time.Minute) // every lease left in flight ends
	left := map[string]bool{}
	for {
		ds := e.receive("q", 100)
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			if deleted[string(d.Body)] {
				t.Fatalf("%s was deleted and is delivered again", d.Body)
			}
			left[string(d.Body)] = true
		}
	}
	if len(left)+len(deleted) != sent {
		t.Fatalf("%d delivered after the crash + %d deleted, of %d sent", len(left), len(deleted), sent)
	}
}
