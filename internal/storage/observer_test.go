package storage

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
)

type countingObserver struct {
	mu      sync.Mutex // guards the fields below
	syncs   int
	appends int
}

func (o *countingObserver) ObserveFsync(time.Duration) {
	o.mu.Lock()
	o.syncs++
	o.mu.Unlock()
}

func (o *countingObserver) ObserveCommitBatch(n int) {
	o.mu.Lock()
	o.appends += n
	o.mu.Unlock()
}

// TestObserverSeesSyncsAndGroups: every acknowledged append under
// SyncAlways is counted in exactly one group commit, and each group is one
// fdatasync.
func TestObserverSeesSyncsAndGroups(t *testing.T) {
	obs := &countingObserver{}
	l, err := Open(Options{FS: vfs.NewMem(), Dir: "/p", Logger: quiet, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	b := mkBatch(t, 1, 100, 1)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				if _, err := l.Append(context.Background(), b); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.appends != 80 {
		t.Fatalf("group commits covered %d appends, want all 80", obs.appends)
	}
	if obs.syncs < 1 || obs.syncs > 80 {
		t.Fatalf("%d fdatasyncs for 80 appends", obs.syncs)
	}
}
