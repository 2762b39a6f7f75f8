package vfs

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
)

// Default is the real file system.
var Default FS = osFS{}

type osFS struct{}

type osFile struct {
	f   *os.File
	pre *prealloc // nil unless Preallocate was called
}

func (f *osFile) Name() string     { return f.f.Name() }
func (f *osFile) OSFile() *os.File { return f.f }

func (f *osFile) ReadAt(p []byte, off int64) (int, error) {
	if f.pre != nil {
		return f.readAtPre(p, off)
	}
	return f.f.ReadAt(p, off)
}

func (f *osFile) Write(p []byte) (int, error) {
	if f.pre != nil {
		return f.writePre(p)
	}
	return f.f.Write(p)
}

func (f *osFile) Truncate(size int64) error {
	if f.pre != nil {
		return f.truncatePre(size)
	}
	return f.f.Truncate(size)
}

func (f *osFile) Close() error {
	var trimErr error
	if f.pre != nil {
		trimErr = f.trimPre()
	}
	if err := f.f.Close(); err != nil {
		return err
	}
	return trimErr
}

// Sync uses fdatasync: the file's length is data for this purpose, and
// modification times are not worth a second journal write per append.
func (f *osFile) Sync() error {
	for {
		err := syscall.Fdatasync(int(f.f.Fd()))
		if err != syscall.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.f.Name(), Err: err}
			}
			return nil
		}
	}
}

func (f *osFile) Size() (int64, error) {
	if f.pre != nil {
		return f.pre.end.Load(), nil
	}
	st, err := f.f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// FilePerm and DirPerm are what the data directory's files and directories
// are created with: only the broker's own user may read messages
// (docs/security.md, "Safe defaults"). Existing files and directories keep
// whatever mode they have.
const (
	FilePerm fs.FileMode = 0o600
	DirPerm  fs.FileMode = 0o700
)

func (osFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND, FilePerm)
	if err != nil {
		return nil, err
	}
	return &osFile{f: f}, nil
}

func (osFS) OpenAppend(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return nil, err
	}
	return &osFile{f: f}, nil
}

func (osFS) Open(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return &osFile{f: f}, nil
}

func (osFS) Remove(name string) error              { return os.Remove(name) }
func (osFS) Rename(oldname, newname string) error  { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(dir string) error             { return os.MkdirAll(dir, DirPerm) }
func (osFS) Stat(name string) (os.FileInfo, error) { return os.Stat(name) }

func (osFS) List(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	sort.Strings(names)
	return names, nil
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(filepath.Clean(dir))
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return &os.PathError{Op: "fsync dir", Path: dir, Err: err}
	}
	return nil
}
