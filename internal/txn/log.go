package txn

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// LogFile is the coordinator's file in the data directory.
const LogFile = "transactions.log"

// removed, as a record's producer id, removes the transactional id (it
// expired); no producer id is negative.
const removed = -1

// stateLog is transactions.log open for appending. Not safe for
// concurrent use: the coordinator's lock serialises it.
type stateLog struct {
	fs      vfs.FS
	dir     string
	f       vfs.File
	records int   // records in the file
	failed  error // a write or sync failed: nothing more is written
}

// openLog reads every intact record, keeping the last per transactional
// id, and cuts a damaged tail (a torn append) so new records follow the
// last good one.
func openLog(fsys vfs.FS, dir string) (*stateLog, map[string]*Txn, error) {
	path := filepath.Join(dir, LogFile)
	l := &stateLog{fs: fsys, dir: dir}
	data, err := vfs.ReadFile(fsys, path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := vfs.WriteFileAtomic(fsys, dir, LogFile, nil); err != nil {
			return nil, nil, fmt.Errorf("transactions: %w", err)
		}
	case err != nil:
		return nil, nil, fmt.Errorf("transactions: %w", err)
	}
	txns := map[string]*Txn{}
	good := 0
	for good < len(data) {
		body, n, err := splitRecord(data[good:])
		if err != nil {
			break
		}
		t, err := decodeBody(body)
		if err != nil {
			break
		}
		if t.ProducerID == removed {
			delete(txns, t.ID)
		} else {
			txns[t.ID] = t
		}
		good += n
		l.records++
	}
	if l.f, err = fsys.OpenAppend(path); err != nil {
		return nil, nil, fmt.Errorf("transactions: %w", err)
	}
	if good < len(data) {
		// A torn tail: only the last append can be torn (every record is
		// synced before the next is written), and it was never answered.
		err := l.f.Truncate(int64(good))
		if err == nil {
			err = l.f.Sync()
		}
		if err != nil {
			l.f.Close()
			return nil, nil, fmt.Errorf("transactions: cutting a damaged tail at %d: %w", good, err)
		}
	}
	return l, txns, nil
}

// put appends t's new state and syncs it. When the file holds mostly
// stale records it is rewritten first with live (t's new state included).
func (l *stateLog) put(t *Txn, live func() []*Txn) error {
	if l.failed != nil {
		return l.failed
	}
	if all := live(); l.records > 4*len(all)+256 {
		return l.rewrite(all)
	}
	if _, err := l.f.Write(encodeRecord(t)); err != nil {
		return l.fail(err)
	}
	if err := l.f.Sync(); err != nil {
		return l.fail(err)
	}
	l.records++
	return nil
}

// rewrite replaces the file with one record per live transactional id:
// after a crash it holds either the old records or the new ones.
func (l *stateLog) rewrite(all []*Txn) error {
	slices.SortFunc(all, func(a, b *Txn) int { return compareString(a.ID, b.ID) })
	var buf []byte
	for _, t := range all {
		buf = append(buf, encodeRecord(t)...)
	}
	if err := vfs.WriteFileAtomic(l.fs, l.dir, LogFile, buf); err != nil {
		return l.fail(err)
	}
	l.f.Close()
	f, err := l.fs.OpenAppend(filepath.Join(l.dir, LogFile))
	if err != nil {
		return l.fail(err)
	}
	l.f, l.records = f, len(all)
	return nil
}

func (l *stateLog) fail(err error) error {
	l.failed = fmt.Errorf("%w: transactions.log: %v", ErrClosed, err)
	return l.failed
}

func (l *stateLog) close() error {
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

func compareString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
