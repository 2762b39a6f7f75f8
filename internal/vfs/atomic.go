package vfs

import (
	"errors"
	"io"
	"io/fs"
	"path/filepath"
)

// WriteFileAtomic replaces dir/name with data so that after a crash the file
// holds either its old or its new contents, never a mix: it writes a
// temporary file beside it, syncs it, renames it over the old one and syncs
// the directory.
func WriteFileAtomic(fsys FS, dir, name string, data []byte) error {
	path := filepath.Join(dir, name)
	tmp := path + ".tmp"
	f, err := fsys.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}

// ReadFile returns the whole of a small file.
func ReadFile(fsys FS, path string) ([]byte, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, size)
	if _, err := f.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf, nil
}

// RemoveAll deletes dir and everything under it; a dir that does not exist
// is not an error.
func RemoveAll(fsys FS, dir string) error {
	names, err := fsys.List(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	for _, n := range names {
		p := filepath.Join(dir, n)
		st, err := fsys.Stat(p)
		if err != nil {
			return err
		}
		if st.IsDir() {
			err = RemoveAll(fsys, p)
		} else {
			err = fsys.Remove(p)
		}
		if err != nil {
			return err
		}
	}
	return fsys.Remove(dir)
}
