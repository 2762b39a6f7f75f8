package vfs

import (
	"errors"
	"hash/maphash"
	"io"
	"io/fs"
	"path/filepath"
	"sync"
)

// atomicWrites serializes WriteFileAtomic calls for one path within the process: they share
// one temporary name, so two at once (a partition's maintenance and its cleaner both write
// its transaction snapshot) could interleave their bytes in it, or rename it from under
// each other. Striped by path, so the lock set stays fixed however many files there are.
var (
	atomicWrites     [64]sync.Mutex
	atomicWritesSeed = maphash.MakeSeed()
)

// WriteFileAtomic replaces dir/name with data so that after a crash the file
// holds either its old or its new contents, never a mix: it writes a
// temporary file beside it, syncs it, renames it over the old one and syncs
// the directory. Calls for one path in one process run one at a time.
func WriteFileAtomic(fsys FS, dir, name string, data []byte) error {
	path := filepath.Join(dir, name)
	mu := &atomicWrites[maphash.String(atomicWritesSeed, path)%uint64(len(atomicWrites))]
	mu.Lock()
	defer mu.Unlock()
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
