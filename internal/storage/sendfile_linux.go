package storage

import (
	"fmt"
	"io"
	"syscall"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// maxSendfileChunk keeps each sendfile call bounded (Linux caps a call at
// about 2 GiB anyway).
const maxSendfileChunk = 1 << 30

// sendfileFrom sends length bytes of f from position with sendfile(2),
// passing an offset pointer so the file's shared seek position is never
// used or moved: concurrent readers of the same segment cannot disturb each
// other. It reports handled=false if w is not a socket or the file is not an
// OS file, so the caller can fall back to a copy.
func sendfileFrom(w io.Writer, f vfs.File, position, length int64) (written int64, handled bool, err error) {
	s := struct{ Position, Length int64 }{position, length}
	sc, ok := w.(syscall.Conn)
	of, ok2 := f.(vfs.OSFile)
	if !ok || !ok2 {
		return 0, false, nil
	}
	out, err := sc.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	in, err := of.OSFile().SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	var serr error
	// The caller pins the file in the cache for the whole transfer, so
	// neither eviction nor retention closes the descriptor under it.
	cerr := in.Control(func(infd uintptr) {
		werr := out.Write(func(outfd uintptr) bool {
			for written < s.Length {
				off := s.Position + written
				n, err := syscall.Sendfile(int(outfd), int(infd), &off, int(min(s.Length-written, maxSendfileChunk)))
				if n > 0 {
					written += int64(n)
				}
				switch {
				case err == syscall.EINTR:
				case err == syscall.EAGAIN:
					return false // wait until the socket is writable
				case err != nil:
					serr = fmt.Errorf("storage: sendfile: %w", err)
					return true
				case n == 0:
					serr = fmt.Errorf("storage: sendfile: %w (segment shrank)", io.ErrUnexpectedEOF)
					return true
				}
			}
			return true
		})
		if serr == nil {
			serr = werr
		}
	})
	if serr == nil {
		serr = cerr
	}
	return written, true, serr
}
