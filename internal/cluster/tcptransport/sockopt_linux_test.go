package tcptransport

import (
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// TestDialLimitsUnackedTime: a dialled connection carries TCP_USER_TIMEOUT = UnackedTimeout,
// so a peer that vanished without a reset is given up on within it.
func TestDialLimitsUnackedTime(t *testing.T) {
	_, addr, rec, _ := serving(t, Config{Node: 2, Peers: map[multiraft.NodeID]string{1: "127.0.0.1:1"}})
	tr, _, _, _ := serving(t, Config{Node: 1, Peers: map[multiraft.NodeID]string{2: addr}, UnackedTimeout: 1234 * time.Millisecond})
	tr.Send(beatTo(2, 1))
	<-rec.got
	for tr.Stats().BatchesSent == 0 { // the writer set raw before it counted the batch
		time.Sleep(time.Millisecond)
	}
	rc, err := tr.peer(2).raw.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got int
	var serr error
	if err := rc.Control(func(fd uintptr) {
		got, serr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout)
	}); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	if got != 1234 {
		t.Fatalf("TCP_USER_TIMEOUT %d ms, want 1234", got)
	}
}
