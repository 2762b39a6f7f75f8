package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// The cleaner's swap.
//
// A clean replaces a run of sealed segments [base, …) with one new
// segment based at base (the run's first base, so the segment before it
// and its seal stay valid). Crash safety rests on one small file,
// cleaner.swap, written atomically (cleaner.swap.tmp, fsync, rename,
// fsync of the directory) once every new file is durable under a
// temporary name:
//
//  1. write <base>.log.swap, .index.swap, .timeindex.swap, .compacted.swap;
//     fsync each; fsync the directory. A crash here: no cleaner.swap, so
//     Open deletes every *.swap file (roll back: the old segments are whole).
//  2. write cleaner.swap naming base and the bases of the other segments of
//     the run: the commit point.
//  3. rename each <base>.X.swap over <base>.X, delete the files of the other
//     segments of the run, fsync the directory, delete cleaner.swap, fsync.
//     A crash anywhere in 3: Open finds cleaner.swap and does 3 again
//     (finishSwap is idempotent: a rename already done finds no .swap file,
//     a deletion already done finds no file).
//
// Open runs recoverSwap before it lists the segments, so it never sees a
// half-done swap. The file's bytes (big-endian):
//
//	| magic "SLCS" 4 | version=1 1 | base int64 8 | n uint32 4 | removed base int64 × n | crc32c 4 |
const (
	swapFile      = "cleaner.swap"
	swapTmpSuffix = ".swap"
	swapVersion   = 1
	// maxSwapRemoved bounds the list a decoder accepts: a run never holds
	// more segments than fit in one 2 GiB segment of 61-byte batches, far
	// fewer in practice.
	maxSwapRemoved = 1 << 20
)

var swapMagic = [4]byte{'S', 'L', 'C', 'S'}

// swapSuffixes are the files of a segment a swap moves, the .log first.
var swapSuffixes = []string{logSuffix, indexSuffix, timeIndexSuffix, markerSuffix}

// errBadSwap: cleaner.swap does not decode.
var errBadSwap = errors.New("storage: bad cleaner swap state")

// swapState is what cleaner.swap says: the new segment's base and the
// bases of the old segments it replaces besides its own.
type swapState struct {
	base    int64
	removed []int64
}

func (st swapState) encode() []byte {
	b := make([]byte, 0, 4+1+8+4+8*len(st.removed)+4)
	b = append(b, swapMagic[:]...)
	b = append(b, swapVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(st.base))
	b = binary.BigEndian.AppendUint32(b, uint32(len(st.removed)))
	for _, r := range st.removed {
		b = binary.BigEndian.AppendUint64(b, uint64(r))
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeSwap reads cleaner.swap. Every removed base is above base and the
// list increases, as a run of segments does.
func decodeSwap(b []byte) (swapState, error) {
	var st swapState
	if len(b) < 21 || [4]byte(b[:4]) != swapMagic || b[4] != swapVersion {
		return st, fmt.Errorf("%w: header", errBadSwap)
	}
	n := int64(binary.BigEndian.Uint32(b[13:]))
	if n > maxSwapRemoved || int64(len(b)) != 21+8*n {
		return st, fmt.Errorf("%w: %d bytes for %d bases", errBadSwap, len(b), n)
	}
	body := len(b) - 4
	if crc32.Checksum(b[:body], castagnoli) != binary.BigEndian.Uint32(b[body:]) {
		return st, fmt.Errorf("%w: checksum", errBadSwap)
	}
	st.base = int64(binary.BigEndian.Uint64(b[5:]))
	if st.base < 0 {
		return st, fmt.Errorf("%w: base %d", errBadSwap, st.base)
	}
	prev := st.base
	for i := range n {
		r := int64(binary.BigEndian.Uint64(b[17+8*i:]))
		if r <= prev {
			return swapState{}, fmt.Errorf("%w: base %d after %d", errBadSwap, r, prev)
		}
		st.removed, prev = append(st.removed, r), r
	}
	return st, nil
}

// swapTmp is the temporary name of a new segment's file.
func swapTmp(dir string, base int64, suffix string) string {
	return filepath.Join(dir, segmentName(base, suffix)+swapTmpSuffix)
}

// recoverSwap finishes a committed swap or rolls back one that was not
// committed. Called by Open before it lists the segments.
func recoverSwap(fsys vfs.FS, dir string) error {
	names, err := fsys.List(dir)
	if err != nil {
		return fmt.Errorf("storage: open %s: %w", dir, err)
	}
	for _, n := range names {
		if n != swapFile {
			continue
		}
		b, err := readSmallFile(fsys, filepath.Join(dir, swapFile))
		if err != nil {
			return fmt.Errorf("storage: read %s: %w", swapFile, err)
		}
		st, err := decodeSwap(b)
		if err != nil {
			// Written atomically, so this is damage on disk: which segment
			// set is whole cannot be told, and guessing could lose data.
			return fmt.Errorf("storage: %s in %s: %w (check which of the old and new segment files are whole, then remove it)", swapFile, dir, err)
		}
		return finishSwap(fsys, dir, st)
	}
	removed := false
	for _, n := range names {
		if strings.HasSuffix(n, swapTmpSuffix) {
			if err := fsys.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("storage: roll back an unfinished clean: %w", err)
			}
			removed = true
		}
	}
	if removed {
		return fsys.SyncDir(dir)
	}
	return nil
}

// commitSwap makes cleaner.swap durable: from here on the swap happens,
// now or at the next Open. On error, maybe says whether cleaner.swap may
// exist (the rename was tried): the swap may then still happen at Open.
func commitSwap(fsys vfs.FS, dir string, st swapState) (maybe bool, err error) {
	tmp := filepath.Join(dir, swapFile+".tmp"+swapTmpSuffix)
	if err := writeFileSynced(fsys, tmp, st.encode()); err != nil {
		fsys.Remove(tmp)
		return false, err
	}
	if err := fsys.Rename(tmp, filepath.Join(dir, swapFile)); err != nil {
		return true, err
	}
	return true, fsys.SyncDir(dir)
}

// finishSwap does step 3 of a committed swap; idempotent.
func finishSwap(fsys vfs.FS, dir string, st swapState) error {
	for _, suf := range swapSuffixes {
		tmp := swapTmp(dir, st.base, suf)
		if _, err := fsys.Stat(tmp); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := fsys.Rename(tmp, filepath.Join(dir, segmentName(st.base, suf))); err != nil {
			return fmt.Errorf("storage: swap in cleaned segment %d: %w", st.base, err)
		}
	}
	// The new segment's names are made durable before any old file goes,
	// in their own step: a disk that persists directory changes one at a
	// time could otherwise leave any mix, and this way the test on MemFS
	// (which persists them at SyncDir) crashes in between too.
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("storage: swap in cleaned segment %d: %w", st.base, err)
	}
	for _, r := range st.removed {
		for _, suf := range swapSuffixes {
			if err := fsys.Remove(filepath.Join(dir, segmentName(r, suf))); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("storage: remove cleaned segment %d: %w", r, err)
			}
		}
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("storage: swap in cleaned segment %d: %w", st.base, err)
	}
	if err := fsys.Remove(filepath.Join(dir, swapFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("storage: finish swap: %w", err)
	}
	return fsys.SyncDir(dir)
}

// readSmallFile reads a whole small file.
func readSmallFile(fsys vfs.FS, path string) ([]byte, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readFileAll(f)
}
