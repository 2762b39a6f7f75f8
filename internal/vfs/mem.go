package vfs

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// MemFS is an in-memory FS that knows what a power cut would keep.
//
// Every file keeps two versions of its contents: what readers see now, and
// what File.Sync last made durable. Every directory keeps two sets of
// entries: the current ones, and the ones SyncDir last made durable. So
// creating, removing or renaming a file is durable only once its directory
// (both directories, for a rename across directories) has been synced, and
// a file's bytes only once the file has been synced. This is the strict
// POSIX reading; real file systems are often kinder, and code that passes on
// MemFS does not depend on their kindness.
//
// Crash, CrashClone and CrashWithTornWrites throw away everything that was
// not made durable, as a power cut would. Files opened before a crash fail
// with ErrCrashed afterwards, so a test cannot keep writing through a handle
// from "before the reboot".
//
// Paths are slash- or OS-separated, relative or absolute; both name the same
// tree ("/a/b" and "a/b" are one file). Unlike the OS, Open of a directory
// fails with EISDIR, and a file removed while open is still readable and
// writable through its handle (as on Unix).
//
// MemFS is safe for concurrent use. It never implements OSFile.
type MemFS struct {
	// mu guards the whole tree: root, epoch, and every field of every
	// memNode and memFile reachable from this MemFS (file data and synced
	// bytes, directory entries and synced entries, handle state).
	mu    sync.Mutex
	root  *memNode
	epoch uint64 // incremented by every crash; handles from older epochs are dead
}

var _ FS = (*MemFS)(nil)

// NewMem returns an empty MemFS whose root directory exists.
func NewMem() *MemFS {
	return &MemFS{root: newDirNode()}
}

// memNode is a file or a directory.
//
// Byte-slice sharing invariant: synced is always set to data[:n:n] (full
// slice expression) and data is only ever appended to, or replaced by a fresh
// array, so bytes below len(synced) in any backing array are never modified.
// That lets Sync and crash copies share arrays instead of copying whole files.
type memNode struct {
	isDir   bool
	modTime time.Time

	// Files.
	data   []byte // current contents, including unsynced writes
	synced []byte // contents as of the last Sync

	// Directories.
	children       map[string]*memNode // current entries
	syncedChildren map[string]*memNode // entries as of the last SyncDir
}

func newDirNode() *memNode {
	return &memNode{
		isDir:          true,
		modTime:        time.Now(),
		children:       map[string]*memNode{},
		syncedChildren: map[string]*memNode{},
	}
}

// splitPath turns a path into its components; the root is nil.
func splitPath(name string) ([]string, error) {
	c := filepath.ToSlash(filepath.Clean(name))
	c = strings.TrimLeft(c, "/")
	if c == "" || c == "." {
		return nil, nil
	}
	parts := strings.Split(c, "/")
	if parts[0] == ".." {
		return nil, syscall.EINVAL
	}
	return parts, nil
}

// walk returns the node at parts. Caller holds m.mu.
func (m *MemFS) walk(parts []string) (*memNode, error) {
	n := m.root
	for _, p := range parts {
		if !n.isDir {
			return nil, syscall.ENOTDIR
		}
		c, ok := n.children[p]
		if !ok {
			return nil, syscall.ENOENT
		}
		n = c
	}
	return n, nil
}

// lookup returns the node named name. Caller holds m.mu.
func (m *MemFS) lookup(name string) (*memNode, error) {
	parts, err := splitPath(name)
	if err != nil {
		return nil, err
	}
	return m.walk(parts)
}

// parent returns the directory holding name and name's last component.
// Caller holds m.mu.
func (m *MemFS) parent(name string) (*memNode, string, []string, error) {
	parts, err := splitPath(name)
	if err != nil {
		return nil, "", nil, err
	}
	if len(parts) == 0 {
		return nil, "", nil, syscall.EINVAL // the root has no parent entry
	}
	dir, err := m.walk(parts[:len(parts)-1])
	if err != nil {
		return nil, "", nil, err
	}
	if !dir.isDir {
		return nil, "", nil, syscall.ENOTDIR
	}
	return dir, parts[len(parts)-1], parts, nil
}

func pathErr(op, name string, err error) error {
	return &os.PathError{Op: op, Path: name, Err: err}
}

// Create implements FS. Truncating an existing file is, like a write, not
// durable until the file is synced.
func (m *MemFS) Create(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, _, err := m.parent(name)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	n := dir.children[base]
	switch {
	case n == nil:
		n = &memNode{modTime: time.Now()}
		dir.children[base] = n
	case n.isDir:
		return nil, pathErr("open", name, syscall.EISDIR)
	default:
		n.data = nil
		n.modTime = time.Now()
	}
	return m.newFile(n, name, true), nil
}

// OpenAppend implements FS.
func (m *MemFS) OpenAppend(name string) (File, error) { return m.open(name, true) }

// Open implements FS.
func (m *MemFS) Open(name string) (File, error) { return m.open(name, false) }

func (m *MemFS) open(name string, write bool) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(name)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	if n.isDir {
		return nil, pathErr("open", name, syscall.EISDIR)
	}
	return m.newFile(n, name, write), nil
}

// Remove implements FS. It removes a file or an empty directory.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, _, err := m.parent(name)
	if err != nil {
		return pathErr("remove", name, err)
	}
	n, ok := dir.children[base]
	if !ok {
		return pathErr("remove", name, syscall.ENOENT)
	}
	if n.isDir && len(n.children) > 0 {
		return pathErr("remove", name, syscall.ENOTEMPTY)
	}
	delete(dir.children, base)
	dir.modTime = time.Now()
	return nil
}

// Rename implements FS. Across directories, a crash after syncing only one
// of them leaves the file under neither name or under both (as a hard link
// would), which is what a strict reading of POSIX allows.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	lerr := func(err error) error {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	odir, obase, oparts, err := m.parent(oldname)
	if err != nil {
		return lerr(err)
	}
	n, ok := odir.children[obase]
	if !ok {
		return lerr(syscall.ENOENT)
	}
	ndir, nbase, nparts, err := m.parent(newname)
	if err != nil {
		return lerr(err)
	}
	if odir == ndir && obase == nbase {
		return nil
	}
	if n.isDir && len(nparts) > len(oparts) && slices.Equal(nparts[:len(oparts)], oparts) {
		return lerr(syscall.EINVAL) // into its own subtree
	}
	if t, ok := ndir.children[nbase]; ok {
		switch {
		case t.isDir && !n.isDir:
			return lerr(syscall.EISDIR)
		case !t.isDir && n.isDir:
			return lerr(syscall.ENOTDIR)
		case t.isDir && len(t.children) > 0:
			return lerr(syscall.ENOTEMPTY)
		}
	}
	delete(odir.children, obase)
	ndir.children[nbase] = n
	now := time.Now()
	odir.modTime, ndir.modTime = now, now
	return nil
}

// MkdirAll implements FS. Each new directory is an entry of its parent and,
// like a file, survives a crash only once that parent has been synced.
func (m *MemFS) MkdirAll(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	parts, err := splitPath(dir)
	if err != nil {
		return pathErr("mkdir", dir, err)
	}
	n := m.root
	for _, p := range parts {
		c, ok := n.children[p]
		if !ok {
			c = newDirNode()
			n.children[p] = c
			n.modTime = c.modTime
		} else if !c.isDir {
			return pathErr("mkdir", dir, syscall.ENOTDIR)
		}
		n = c
	}
	return nil
}

// List implements FS.
func (m *MemFS) List(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(dir)
	if err != nil {
		return nil, pathErr("open", dir, err)
	}
	if !n.isDir {
		return nil, pathErr("readdirent", dir, syscall.ENOTDIR)
	}
	return slices.Sorted(maps.Keys(n.children)), nil
}

// SyncDir implements FS: the current entries of dir become durable.
func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(dir)
	if err != nil {
		return pathErr("open", dir, err)
	}
	if !n.isDir {
		return pathErr("fsync dir", dir, syscall.ENOTDIR)
	}
	n.syncedChildren = maps.Clone(n.children)
	return nil
}

// Stat implements FS. The FileInfo is a snapshot.
func (m *MemFS) Stat(name string) (os.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(name)
	if err != nil {
		return nil, pathErr("stat", name, err)
	}
	base := filepath.Base(filepath.Clean(name))
	return &memInfo{name: base, size: int64(len(n.data)), dir: n.isDir, mod: n.modTime}, nil
}

// SyncAll makes the whole current state durable, as if every file and every
// directory had been synced. Tests use it to set up a starting state that a
// crash must not undo.
func (m *MemFS) SyncAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	var rec func(n *memNode)
	rec = func(n *memNode) {
		if !n.isDir {
			n.synced = n.data[:len(n.data):len(n.data)]
			return
		}
		n.syncedChildren = maps.Clone(n.children)
		for _, c := range n.children {
			rec(c)
		}
	}
	rec(m.root)
}

type memInfo struct {
	name string
	size int64
	dir  bool
	mod  time.Time
}

func (i *memInfo) Name() string       { return i.name }
func (i *memInfo) Size() int64        { return i.size }
func (i *memInfo) ModTime() time.Time { return i.mod }
func (i *memInfo) IsDir() bool        { return i.dir }
func (i *memInfo) Sys() any           { return nil }
func (i *memInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}
