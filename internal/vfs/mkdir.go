package vfs

import "path/filepath"

// MkdirAllDurable creates dir and any missing parents, and syncs the parent
// of each directory it created, so the new directories survive a power cut.
func MkdirAllDurable(fs FS, dir string) error {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := fs.Stat(d); err == nil {
			break
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := fs.MkdirAll(dir); err != nil {
		return err
	}
	for _, d := range missing {
		if err := fs.SyncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}
