package vfs

import "syscall"

// Allocator is implemented by files whose space can be reserved without
// writing it (fallocate(2)): the OS implementation; MemFS and ErrorFS do
// not, and a caller writes zeros instead.
type Allocator interface {
	// Allocate makes the file at least size bytes long, of zeros, with its
	// blocks allocated on the device, so a later write into them cannot
	// fail for lack of space.
	Allocate(size int64) error
}

func (f *osFile) Allocate(size int64) error {
	for {
		err := syscall.Fallocate(int(f.f.Fd()), 0, 0, size)
		if err != syscall.EINTR {
			return err
		}
	}
}
