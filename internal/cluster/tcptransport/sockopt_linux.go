package tcptransport

import (
	"syscall"
	"time"
)

// tcpUserTimeout is Linux's TCP_USER_TIMEOUT (include/uapi/linux/tcp.h), which the frozen
// syscall package does not name.
const tcpUserTimeout = 0x12

// limitUnacked makes the kernel give up on a connection whose sent data stays
// unacknowledged (or whose window stays shut) for longer than d. Without it, a peer that vanished without a reset (a
// power cut, a pulled cable) swallows our writes into the socket buffer while TCP
// retransmits for many minutes, and when it comes back we would not notice until a
// retransmission, backing off to two minutes apart, drew its reset.
func limitUnacked(c syscall.RawConn, d time.Duration) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout, int(d.Milliseconds()))
	})
	if err != nil {
		return err
	}
	return serr
}
