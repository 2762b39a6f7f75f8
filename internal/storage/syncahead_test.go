package storage

import (
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// TestSyncAheadBytes: under SyncNever an append never syncs, unless SyncAheadBytes were
// written since the last sync ahead: then a background fdatasync follows, without the
// appender waiting for it, and Sync afterwards finds everything before it durable.
func TestSyncAheadBytes(t *testing.T) {
	b := mkBatch(t, 1, 100, 1)
	for _, ahead := range []int64{0, int64(3 * len(b))} {
		obs := &countingObserver{}
		o := testOptions(t, vfs.NewMem(), "/p")
		o.Sync, o.SyncAheadBytes, o.Observer = SyncPolicy{Mode: SyncNever}, ahead, obs
		l := mustOpen(t, o)
		mustAppend(t, l, b)
		mustAppend(t, l, b) // 2 batches: below the threshold
		time.Sleep(20 * time.Millisecond)
		if n := syncs(obs); n != 0 {
			t.Fatalf("ahead %d: %d fdatasyncs after 2 appends, want none", ahead, n)
		}
		mustAppend(t, l, b) // the third reaches it
		deadline := time.Now().Add(5 * time.Second)
		for ahead > 0 && syncs(obs) == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
		want := 0
		if ahead > 0 {
			want = 1
		}
		if n := syncs(obs); n != want {
			t.Fatalf("ahead %d: %d fdatasyncs after 3 appends, want %d", ahead, n, want)
		}
		l.syncMu.Lock()
		synced := l.syncedNext
		l.syncMu.Unlock()
		if ahead > 0 && synced != 3 {
			t.Fatalf("synced ahead up to offset %d, want 3", synced)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func syncs(o *countingObserver) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.syncs
}
