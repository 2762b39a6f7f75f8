package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// SnapshotFile is the snapshot's name in the owner's directory; the one
// before it is kept as previousSnapshotFile, so a damaged snapshot costs
// nothing (see writeSnapshot).
const (
	SnapshotFile         = "snapshot"
	previousSnapshotFile = "snapshot.1"
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ErrSnapshotDamaged: a snapshot file's checksum does not match its body.
var ErrSnapshotDamaged = errors.New("snapshot checksum mismatch")

// SnapshotPolicy says where an owner's snapshots go and how often.
type SnapshotPolicy struct {
	FS    vfs.FS
	Dir   string
	Every int                           // events between snapshots
	Warn  func(msg string, args ...any) // reports a failed snapshot (the journal keeps working)
}

// snapshots is the policy with its counters, guarded by the journal's mu.
type snapshots struct {
	SnapshotPolicy
	since int   // events journaled since the last snapshot was taken
	busy  bool  // a snapshot is being encoded, or waits for the journal to reach it
	at    int64 // position of the current snapshot file: the next cut
	// resets counts Reset calls: a snapshot captured before one holds events the failed
	// write may have lost, and is dropped.
	resets int
}

// Capture takes an owner's state at the journal's current position, called with the lock
// that makes the state match it (the one held to submit). It returns the encoding of that
// state, which the journal runs later on a goroutine of its own while the owner goes on:
// an owner whose state is large captures it cheaply (copy on write) and is not held for
// the encoding.
type Capture func() (encode func() ([]byte, error))

// Record submits encoded events and, once enough have piled up since the
// last snapshot, takes one: capture is called at once (the caller holds the
// lock that makes its state match the journal position), its encoding runs
// aside, and the bytes are written once the journal is durable up to here.
func (j *Journal) Record(enc [][]byte, capture Capture) <-chan error {
	ch := j.Submit(enc)
	j.MaybeSnapshot(j.snap.Every, len(enc), capture)
	return ch
}

// MaybeSnapshot takes a snapshot if at least min events (after adding added)
// were journaled since the last one. Maintenance calls it with a lower min
// so an idle owner's last events are folded in too. The caller holds the
// lock that makes capture's state match the journal position.
func (j *Journal) MaybeSnapshot(min, added int, capture Capture) {
	j.mu.Lock()
	j.snap.since += added
	take := j.snap.since > 0 && j.snap.since >= min && !j.snap.busy && j.failed == nil && !j.closing
	if take {
		j.snap.busy, j.snap.since = true, 0
		j.encoders.Add(1)
	}
	pos, resets := j.submitted, j.snap.resets
	j.mu.Unlock()
	if !take {
		return
	}
	encode := capture()
	go func() {
		defer j.encoders.Done()
		body, err := encode()
		if err != nil {
			j.snapshotDone(fmt.Errorf("encode: %w", err))
			return
		}
		j.onDurable(func(durable int64) {
			j.mu.Lock()
			stale := j.snap.resets != resets
			j.mu.Unlock()
			switch {
			case durable < 0:
				j.snapshotDone(fmt.Errorf("the journal failed or closed before it was durable"))
			case stale:
				j.snapshotDone(fmt.Errorf("the journal was reset after a write failure since it was taken"))
			default:
				j.snapshotDone(j.writeSnapshot(pos, body, durable))
			}
		})
	}()
}

// SnapshotEvery is the policy's Every, for owners that derive their
// maintenance threshold from it.
func (j *Journal) SnapshotEvery() int { return j.snap.Every }

func (j *Journal) snapshotDone(err error) {
	j.mu.Lock()
	j.snap.busy = false
	j.mu.Unlock()
	if err != nil && j.snap.Warn != nil {
		j.snap.Warn("snapshot failed", "dir", j.snap.Dir, "err", err)
	}
}

// writeSnapshot keeps two snapshots: the current one becomes the previous
// one, the new one the current, and the journal is cut only below the
// previous one's position. So if the newest snapshot is damaged, Load
// restores the one before it and replays the journal from there, and loses
// nothing. A crash between the rename and the write leaves the previous
// snapshot alone, which the journal still continues.
func (j *Journal) writeSnapshot(pos int64, body []byte, durable int64) error {
	if durable < pos {
		return fmt.Errorf("journal durable to %d, snapshot at %d", durable, pos)
	}
	cur := filepath.Join(j.snap.Dir, SnapshotFile)
	if err := j.snap.FS.Rename(cur, filepath.Join(j.snap.Dir, previousSnapshotFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := vfs.WriteFileAtomic(j.snap.FS, j.snap.Dir, SnapshotFile, FrameSnapshot(pos, body)); err != nil {
		return err
	}
	j.mu.Lock()
	prev := j.snap.at
	j.snap.at = pos
	j.mu.Unlock()
	_, err := j.log.DeleteBelow(prev)
	return err
}

// FrameSnapshot encodes a snapshot file:
//
//	| "SJS2" | position uint64 | CRC-32C of position and body uint32 | body … |
//
// Other crash-atomic state files of the broker (producer state) use the
// same framing.
func FrameSnapshot(pos int64, body []byte) []byte {
	buf := make([]byte, 16, 16+len(body))
	copy(buf, snapshotMagic)
	binary.BigEndian.PutUint64(buf[4:12], uint64(pos))
	crc := crc32.Update(crc32.Checksum(buf[4:12], crcTable), crcTable, body)
	binary.BigEndian.PutUint32(buf[12:16], crc)
	return append(buf, body...)
}

// snapshotMagic starts a snapshot whose checksum covers its position too.
// The first framing (| position | CRC-32C of body | body |) is still read:
// its first four bytes are a position's high bytes, zero in practice.
const snapshotMagic = "SJS2"

// UnframeSnapshot checks and splits what FrameSnapshot made (or the first
// framing, whose position no checksum covers).
func UnframeSnapshot(data []byte) (pos int64, body []byte, err error) {
	if len(data) >= 16 && string(data[:4]) == snapshotMagic {
		crc := crc32.Update(crc32.Checksum(data[4:12], crcTable), crcTable, data[16:])
		if crc != binary.BigEndian.Uint32(data[12:16]) {
			return 0, nil, ErrSnapshotDamaged
		}
		return int64(binary.BigEndian.Uint64(data[4:12])), data[16:], nil
	}
	if len(data) < 12 || crc32.Checksum(data[12:], crcTable) != binary.BigEndian.Uint32(data[8:12]) {
		return 0, nil, ErrSnapshotDamaged
	}
	if p := binary.BigEndian.Uint64(data[:8]); p > 1<<48 {
		return 0, nil, ErrSnapshotDamaged // no journal is that long: a damaged position
	}
	return int64(binary.BigEndian.Uint64(data[:8])), data[12:], nil
}

// LoadSnapshot reads dir's current snapshot: the journal offset it covers
// and its body. found is false when there is none (a new owner, or one that
// never snapshotted).
func LoadSnapshot(fsys vfs.FS, dir string) (pos int64, body []byte, found bool, err error) {
	return readSnapshot(fsys, filepath.Join(dir, SnapshotFile))
}

func readSnapshot(fsys vfs.FS, path string) (pos int64, body []byte, found bool, err error) {
	data, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil, false, nil
	}
	if err != nil {
		return 0, nil, false, err
	}
	pos, body, err = UnframeSnapshot(data)
	if err != nil {
		return 0, nil, false, fmt.Errorf("snapshot %s: %w", path, err)
	}
	return pos, body, true, nil
}

// ReadSnapshotUpTo reads and unframes the snapshot file at path, refusing one
// that covers more than end (the position a log reached): a snapshot synced
// before its log's tail was lost in a crash describes what is no longer there.
// A state kept beside a partition log (idempotent producers, transactions)
// loads its snapshot with it, then rescans the log from the position returned.
func ReadSnapshotUpTo(fsys vfs.FS, path string, end int64) (pos int64, body []byte, err error) {
	data, err := vfs.ReadFile(fsys, path)
	if err != nil {
		return 0, nil, err
	}
	pos, body, err = UnframeSnapshot(data)
	if err != nil {
		return 0, nil, err
	}
	if pos > end {
		return 0, nil, fmt.Errorf("snapshot at %d is past the log's end %d", pos, end)
	}
	return pos, body, nil
}
