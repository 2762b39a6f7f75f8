package broker

import (
	"encoding/binary"
	"testing"

	"github.com/sluice-mq/sluice/internal/journal"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// FuzzTxnSnapshot: any txn.snapshot contents load or are refused, never
// panic, and what loads is bounded by the input.
func FuzzTxnSnapshot(f *testing.F) {
	body := binary.AppendVarint(nil, 1)
	body = binary.AppendVarint(binary.AppendVarint(body, 7), 3)
	body = binary.AppendVarint(body, 1)
	body = binary.AppendVarint(binary.AppendVarint(binary.AppendVarint(body, 7), 0), 2)
	f.Add(journal.FrameSnapshot(10, body))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := vfs.NewMem()
		if err := vfs.MkdirAllDurable(mem, "/p"); err != nil {
			t.Fatal(err)
		}
		if err := vfs.WriteFileAtomic(mem, "/p", txnSnapshotFile, data); err != nil {
			t.Fatal(err)
		}
		var tp txnPartition
		tp.mu.Lock()
		_, _ = tp.loadSnapshotLocked(mem, "/p", 1<<40)
		tp.mu.Unlock()
		if len(tp.open)+len(tp.aborted) > len(data) {
			t.Fatalf("%d entries from %d bytes", len(tp.open)+len(tp.aborted), len(data))
		}
	})
}
