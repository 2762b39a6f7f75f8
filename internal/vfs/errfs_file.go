package vfs

import "syscall"

// errFile is a file opened through an ErrorFS. Embedding File (an interface)
// forwards Close, Size and Name, and deliberately hides OSFile.
type errFile struct {
	File
	fs *ErrorFS
}

// Write fails as a fault says, or writes what the free space allows and
// fails with ENOSPC if that is not all of p.
func (f *errFile) Write(p []byte) (int, error) {
	if flt, ok := f.fs.fault(OpWrite, f.Name()); ok {
		k := 0
		if len(p) > 0 {
			k = max(0, min(flt.ShortWrite, len(p)-1))
		}
		n, err := f.writeWithin(p[:k])
		if err != nil {
			return n, err
		}
		return n, pathErr("write", f.Name(), flt.Err)
	}
	n, err := f.writeWithin(p)
	if err != nil {
		return n, err
	}
	if n < len(p) {
		return n, pathErr("write", f.Name(), syscall.ENOSPC)
	}
	return n, nil
}

// writeWithin writes as much of p as the free space allows, and returns only
// the underlying file's errors.
func (f *errFile) writeWithin(p []byte) (int, error) {
	allowed := f.fs.reserve(int64(len(p)))
	if allowed == 0 {
		return 0, nil
	}
	n, err := f.File.Write(p[:allowed])
	f.fs.release(allowed - int64(n))
	return n, err
}

func (f *errFile) Sync() error {
	if flt, ok := f.fs.fault(OpSync, f.Name()); ok {
		return pathErr("fdatasync", f.Name(), flt.Err)
	}
	return f.File.Sync()
}

func (f *errFile) ReadAt(p []byte, off int64) (int, error) {
	if flt, ok := f.fs.fault(OpReadAt, f.Name()); ok {
		return 0, pathErr("read", f.Name(), flt.Err)
	}
	return f.File.ReadAt(p, off)
}

// Truncate fails as a fault says, or with ENOSPC if it would extend the file
// beyond the free space; shrinking gives space back.
func (f *errFile) Truncate(size int64) error {
	if flt, ok := f.fs.fault(OpTruncate, f.Name()); ok {
		return pathErr("truncate", f.Name(), flt.Err)
	}
	if !f.fs.limited() {
		return f.File.Truncate(size)
	}
	cur, err := f.File.Size()
	if err != nil {
		return err
	}
	grow := size - cur
	if grow > 0 {
		if got := f.fs.reserve(grow); got < grow {
			f.fs.release(got)
			return pathErr("truncate", f.Name(), syscall.ENOSPC)
		}
	}
	if err := f.File.Truncate(size); err != nil {
		f.fs.release(grow)
		return err
	}
	f.fs.release(-grow)
	return nil
}
