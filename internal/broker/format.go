package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// The on-disk format of a data directory, recorded in format.json at its
// root (docs/operations.md, "Upgrades and the on-disk format").
//
// FormatMajor changes when a binary of the previous major could misread
// what this one writes (a file's layout changes, a file's meaning changes):
// a broker refuses a directory of a newer major, since guessing could lose
// acknowledged messages. FormatMinor changes when files are only added, so
// an older binary of the same major can still open the directory (it does
// not read what it does not know; what those files record is then ignored
// by it, never misread). A directory without format.json was written
// before the file existed, which is format 1.0.
//
// History: 1.0 the first; 1.1 adds receipt-key.json (receipts bound to their
// queue: a 1.0 binary ignores the key and issues its own old receipts,
// which 1.1 refuses as stale — at most a redelivery).
const (
	FormatMajor = 1
	FormatMinor = 1
)

// formatFile is format.json's name in the data directory.
const formatFile = "format.json"

// ErrFormatTooNew is returned by Open for a data directory written in a
// newer major on-disk format than this binary reads.
var ErrFormatTooNew = errors.New("data directory written by a newer sluice")

// diskFormat is format.json's contents.
type diskFormat struct {
	Major int `json:"major"`
	Minor int `json:"minor"`
}

// checkFormat reads dir's format.json and refuses a newer major; it writes
// the file when it is absent (a new directory, or one older code wrote, which
// is 1.0) and when this binary's minor is newer than the one recorded, so the
// file always names the newest format whose files may be in the directory.
// It is called with the directory locked, before anything else is written.
func checkFormat(fsys vfs.FS, dir string, log *slog.Logger) error {
	path := filepath.Join(dir, formatFile)
	cur := diskFormat{Major: FormatMajor, Minor: FormatMinor}
	b, err := vfs.ReadFile(fsys, path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return writeFormat(fsys, dir, cur)
	case err != nil:
		return fmt.Errorf("broker: reading %s: %w", path, err)
	}
	var f diskFormat
	if err := json.Unmarshal(b, &f); err != nil || f.Major < 1 {
		// A wrong guess of the format could misread every file, so the
		// broker does not guess: the operator knows which sluice wrote it.
		return fmt.Errorf("broker: %s is damaged (%q): if this data directory was written by sluice "+
			"with on-disk format %d.x, write {\"major\":%d,\"minor\":0} into it (docs/operations.md, \"Upgrades and the on-disk format\")",
			path, truncateForLog(b), FormatMajor, FormatMajor)
	}
	switch {
	case f.Major > cur.Major:
		return fmt.Errorf("broker: %w: %s has on-disk format %d.%d and this binary reads %d.x; run a sluice that reads format %d "+
			"(a data directory is never converted back to an older major; docs/operations.md, \"Upgrades and the on-disk format\")",
			ErrFormatTooNew, dir, f.Major, f.Minor, cur.Major, f.Major)
	case f.Major < cur.Major:
		// No older major exists yet; the conversion will live here.
		return fmt.Errorf("broker: %s has on-disk format %d.%d, which this binary (format %d.%d) cannot convert",
			dir, f.Major, f.Minor, cur.Major, cur.Minor)
	case f.Minor > cur.Minor:
		log.Info("data directory written by a newer sluice of the same on-disk format; files this binary does not know are left alone",
			"dir", dir, "format", fmt.Sprintf("%d.%d", f.Major, f.Minor), "reads", fmt.Sprintf("%d.%d", cur.Major, cur.Minor))
		return nil
	case f.Minor < cur.Minor:
		return writeFormat(fsys, dir, cur)
	}
	return nil
}

func writeFormat(fsys vfs.FS, dir string, f diskFormat) error {
	b, _ := json.Marshal(f)
	if err := vfs.WriteFileAtomic(fsys, dir, formatFile, append(b, '\n')); err != nil {
		return fmt.Errorf("broker: writing %s: %w", formatFile, err)
	}
	return nil
}

// truncateForLog keeps a damaged file's first bytes for an error message.
func truncateForLog(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "…"
	}
	return string(b)
}
