package vfs

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// Op names an operation that ErrorFS can fail.
type Op uint8

// The operations ErrorFS can fail. OpAny matches every one of them.
const (
	OpAny      Op = iota
	OpCreate      // FS.Create
	OpOpen        // FS.Open and FS.OpenAppend
	OpRemove      // FS.Remove
	OpRename      // FS.Rename (Path matches either name)
	OpMkdirAll    // FS.MkdirAll
	OpList        // FS.List
	OpSyncDir     // FS.SyncDir
	OpStat        // FS.Stat
	OpWrite       // File.Write
	OpSync        // File.Sync
	OpTruncate    // File.Truncate
	OpReadAt      // File.ReadAt
)

var opNames = [...]string{
	OpAny: "any", OpCreate: "create", OpOpen: "open", OpRemove: "remove",
	OpRename: "rename", OpMkdirAll: "mkdir", OpList: "list", OpSyncDir: "syncdir",
	OpStat: "stat", OpWrite: "write", OpSync: "sync", OpTruncate: "truncate",
	OpReadAt: "read",
}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "op?"
}

// Fault is a rule for ErrorFS: which operations fail, how, and how often.
type Fault struct {
	// Op is the operation that fails; OpAny fails all of them.
	Op Op
	// Path, if set, restricts the fault to this file or directory (compared
	// after filepath.Clean; for a file operation, the name it was opened with).
	Path string
	// Match, if set, further restricts the fault to operations it accepts.
	// It is called with ErrorFS's mutex held and must not call back into it.
	Match func(op Op, path string) bool
	// Err is the error returned, wrapped in *os.PathError (*os.LinkError for
	// Rename); syscall.EIO if nil.
	Err error
	// Count is how many times the fault fires before it retires itself;
	// zero or less means every time until ClearFaults.
	Count int
	// ShortWrite, for OpWrite, is how many bytes of the buffer are really
	// written before the error is returned (capped below len(p), so the write
	// is always short). Zero writes nothing.
	ShortWrite int
}

// Unlimited is the free space of an ErrorFS that never runs out.
const Unlimited = -1

// ErrorFS wraps an FS and makes chosen operations fail, for testing what a
// caller does on ENOSPC, EIO, short writes and failed metadata operations.
// Faults are added and cleared while the FS is in use.
//
// ErrorFS can also model a disk of limited size: SetSpace gives it a number
// of free bytes that writes (and extending truncates) consume and that
// Remove, shrinking truncates, Create over an existing file and Rename over
// an existing file give back. A write that does not fit writes what fits and
// fails with ENOSPC; raising the space or removing files lets writes succeed
// again. Space given back by removing a file that is still open is given back
// at once, unlike on Unix.
//
// Errors are wrapped so that errors.Is(err, syscall.ENOSPC) (or whatever
// Fault.Err is) holds. Files opened through ErrorFS never implement OSFile.
// ErrorFS is safe for concurrent use.
type ErrorFS struct {
	fs FS

	// mu guards faults, space and fired.
	mu     sync.Mutex
	faults []Fault
	space  int64      // free bytes, or Unlimited
	fired  map[Op]int // injected errors so far, by operation
}

var _ FS = (*ErrorFS)(nil)

// NewErrorFS returns an ErrorFS over fs with no faults and unlimited space.
func NewErrorFS(fs FS) *ErrorFS {
	return &ErrorFS{fs: fs, space: Unlimited, fired: map[Op]int{}}
}

// Inject adds a fault. Faults are tried in the order they were added and the
// first that matches an operation fires.
func (e *ErrorFS) Inject(f Fault) {
	if f.Err == nil {
		f.Err = syscall.EIO
	}
	if f.Path != "" {
		f.Path = filepath.Clean(f.Path)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.faults = append(e.faults, f)
}

// ClearFaults removes every fault. It does not change the free space.
func (e *ErrorFS) ClearFaults() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.faults = nil
}

// SetSpace sets the free space in bytes; Unlimited (or any negative number)
// turns the limit off.
func (e *ErrorFS) SetSpace(n int64) {
	if n < 0 {
		n = Unlimited
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.space = n
}

// Space returns the free space in bytes, or Unlimited.
func (e *ErrorFS) Space() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.space
}

// Fired returns how many errors faults have injected into op (OpAny: into
// all operations). Running out of space is not counted.
func (e *ErrorFS) Fired(op Op) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if op == OpAny {
		total := 0
		for _, n := range e.fired {
			total += n
		}
		return total
	}
	return e.fired[op]
}

// fault returns the fault that fires for op on paths, if any, and retires it
// once its count is spent.
func (e *ErrorFS) fault(op Op, paths ...string) (Fault, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range e.faults {
		f := &e.faults[i]
		if f.Op != OpAny && f.Op != op {
			continue
		}
		path, ok := matchPath(f.Path, paths)
		if !ok || (f.Match != nil && !f.Match(op, path)) {
			continue
		}
		fired := *f
		if f.Count > 0 {
			f.Count--
			if f.Count == 0 {
				e.faults = append(e.faults[:i], e.faults[i+1:]...)
			}
		}
		e.fired[op]++
		return fired, true
	}
	return Fault{}, false
}

// matchPath returns the first of paths that want (a cleaned path, or empty
// for any) matches.
func matchPath(want string, paths []string) (string, bool) {
	for _, p := range paths {
		if want == "" || filepath.Clean(p) == want {
			return p, true
		}
	}
	return "", false
}

// reserve takes up to n bytes of free space and returns how many it took.
func (e *ErrorFS) reserve(n int64) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.space == Unlimited {
		return n
	}
	n = min(n, e.space)
	e.space -= n
	return n
}

// release gives n bytes of free space back.
func (e *ErrorFS) release(n int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.space != Unlimited && n > 0 {
		e.space += n
	}
}

func (e *ErrorFS) limited() bool { return e.Space() != Unlimited }

// fileSize returns the size of the regular file name, or 0. It is used only
// to account for space given back.
func (e *ErrorFS) fileSize(name string) int64 {
	if !e.limited() {
		return 0
	}
	st, err := e.fs.Stat(name)
	if err != nil || st.IsDir() {
		return 0
	}
	return st.Size()
}

// Create implements FS.
func (e *ErrorFS) Create(name string) (File, error) {
	if f, ok := e.fault(OpCreate, name); ok {
		return nil, pathErr("open", name, f.Err)
	}
	old := e.fileSize(name)
	file, err := e.fs.Create(name)
	if err != nil {
		return nil, err
	}
	e.release(old)
	return &errFile{File: file, fs: e}, nil
}

// OpenAppend implements FS.
func (e *ErrorFS) OpenAppend(name string) (File, error) {
	if f, ok := e.fault(OpOpen, name); ok {
		return nil, pathErr("open", name, f.Err)
	}
	file, err := e.fs.OpenAppend(name)
	if err != nil {
		return nil, err
	}
	return &errFile{File: file, fs: e}, nil
}

// Open implements FS.
func (e *ErrorFS) Open(name string) (File, error) {
	if f, ok := e.fault(OpOpen, name); ok {
		return nil, pathErr("open", name, f.Err)
	}
	file, err := e.fs.Open(name)
	if err != nil {
		return nil, err
	}
	return &errFile{File: file, fs: e}, nil
}

// Remove implements FS.
func (e *ErrorFS) Remove(name string) error {
	if f, ok := e.fault(OpRemove, name); ok {
		return pathErr("remove", name, f.Err)
	}
	size := e.fileSize(name)
	if err := e.fs.Remove(name); err != nil {
		return err
	}
	e.release(size)
	return nil
}

// Rename implements FS.
func (e *ErrorFS) Rename(oldname, newname string) error {
	if f, ok := e.fault(OpRename, oldname, newname); ok {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: f.Err}
	}
	var replaced int64
	if filepath.Clean(oldname) != filepath.Clean(newname) {
		replaced = e.fileSize(newname)
	}
	if err := e.fs.Rename(oldname, newname); err != nil {
		return err
	}
	e.release(replaced)
	return nil
}

// MkdirAll implements FS.
func (e *ErrorFS) MkdirAll(dir string) error {
	if f, ok := e.fault(OpMkdirAll, dir); ok {
		return pathErr("mkdir", dir, f.Err)
	}
	return e.fs.MkdirAll(dir)
}

// List implements FS.
func (e *ErrorFS) List(dir string) ([]string, error) {
	if f, ok := e.fault(OpList, dir); ok {
		return nil, pathErr("open", dir, f.Err)
	}
	return e.fs.List(dir)
}

// SyncDir implements FS.
func (e *ErrorFS) SyncDir(dir string) error {
	if f, ok := e.fault(OpSyncDir, dir); ok {
		return pathErr("fsync dir", dir, f.Err)
	}
	return e.fs.SyncDir(dir)
}

// Stat implements FS.
func (e *ErrorFS) Stat(name string) (os.FileInfo, error) {
	if f, ok := e.fault(OpStat, name); ok {
		return nil, pathErr("stat", name, f.Err)
	}
	return e.fs.Stat(name)
}
