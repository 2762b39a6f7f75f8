package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// A journaled state machine (a queue's cursor, a subscription's cursors, the
// group coordinator) is rebuilt at start from its latest snapshot plus the
// journal after it. The snapshot file, in the owner's directory:
//
//	| journal offset uint64 | CRC-32C of body uint32 | body … |
//
// The body is the owner's own encoding. A snapshot is written only once the
// journal is durable up to its offset, and the journal is then cut below it,
// so replay work at start stays bounded.
const snapshotFile = "snapshot"

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// snapshotter is a journal's snapshot policy. Its counters are guarded by
// the journal's mu.
type snapshotter struct {
	fs    vfs.FS
	dir   string
	every int // events between snapshots
	warn  func(msg string, args ...any)

	since int  // events journaled since the last snapshot was taken
	busy  bool // a snapshot waits for the journal to reach it
}

// record submits encoded events and, once enough have piled up since the last
// snapshot, takes one: snapshot is called at once (the caller holds the lock
// that makes its state match the journal position) and its bytes are written
// when the journal is durable up to here.
func (j *journal) record(enc [][]byte, snapshot func() ([]byte, error)) <-chan error {
	ch := j.submit(enc)
	j.maybeSnapshot(j.snap.every, len(enc), snapshot)
	return ch
}

// maybeSnapshot takes a snapshot if at least min events (after adding added)
// were journaled since the last one. Maintenance calls it with a lower min so
// an idle owner's last events are folded in too.
func (j *journal) maybeSnapshot(min, added int, snapshot func() ([]byte, error)) {
	j.mu.Lock()
	j.snap.since += added
	take := j.snap.since > 0 && j.snap.since >= min && !j.snap.busy && j.failed == nil
	if take {
		j.snap.busy, j.snap.since = true, 0
	}
	pos := j.submitted
	j.mu.Unlock()
	if !take {
		return
	}
	body, err := snapshot()
	if err != nil {
		j.snapshotDone(fmt.Errorf("encode: %w", err))
		return
	}
	j.onDurable(func(durable int64) { j.snapshotDone(j.writeSnapshot(pos, body, durable)) })
}

func (j *journal) snapshotDone(err error) {
	j.mu.Lock()
	j.snap.busy = false
	j.mu.Unlock()
	if err != nil {
		j.snap.warn("snapshot failed", "dir", j.snap.dir, "err", err)
	}
}

// replayed tells the snapshot policy how many events a start replayed, so a
// long replay is folded into a snapshot soon.
func (j *journal) replayed(n int) {
	j.mu.Lock()
	j.snap.since = n
	j.mu.Unlock()
}

func (j *journal) writeSnapshot(pos int64, body []byte, durable int64) error {
	if durable < pos {
		return fmt.Errorf("journal durable to %d, snapshot at %d", durable, pos)
	}
	buf := make([]byte, 12, 12+len(body))
	binary.BigEndian.PutUint64(buf[:8], uint64(pos))
	binary.BigEndian.PutUint32(buf[8:12], crc32.Checksum(body, crcTable))
	buf = append(buf, body...)
	if err := writeFileAtomic(j.snap.fs, j.snap.dir, snapshotFile, buf); err != nil {
		return err
	}
	_, err := j.log.DeleteBelow(pos)
	return err
}

// loadSnapshot reads dir's snapshot: the journal offset it covers and its
// body. found is false when there is none (a new owner, or one that never
// snapshotted).
func loadSnapshot(fsys vfs.FS, dir string) (pos int64, body []byte, found bool, err error) {
	path := filepath.Join(dir, snapshotFile)
	data, err := readFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil, false, nil
	}
	if err != nil {
		return 0, nil, false, err
	}
	if len(data) < 12 || crc32.Checksum(data[12:], crcTable) != binary.BigEndian.Uint32(data[8:12]) {
		return 0, nil, false, fmt.Errorf("snapshot %s: checksum mismatch", path)
	}
	return int64(binary.BigEndian.Uint64(data[:8])), data[12:], true, nil
}
