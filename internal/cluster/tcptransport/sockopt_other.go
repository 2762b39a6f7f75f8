//go:build !linux

package tcptransport

import (
	"syscall"
	"time"
)

// limitUnacked does nothing where TCP_USER_TIMEOUT is not known: the write deadline and the
// peer's idle timeout still bound what a silent peer costs.
func limitUnacked(syscall.RawConn, time.Duration) error { return nil }
