package testproc

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
)

// Ports for servers a test restarts on the same address (a cluster node killed and
// started again, a broker in a kill loop): they are named before the server binds them
// and must stay free while it is down.
//
// A port from the kernel (":0") is from the ephemeral range (net.ipv4.ip_local_port_range,
// 32768–60999 by default), which is also where every outgoing connection's local port
// comes from: while a node is down, a peer dialing it, or any test's client, may be given
// its port, and the restart fails with "address already in use" (seen in the cluster e2e
// tests under load). Below that range only a listener that names its port can take one, so
// these are drawn from 20000–32767, checked free by binding, and never handed out twice:
// not by one test binary (handedOut), nor by two running at once (go test runs packages in
// parallel): each port handed out is reserved by an flock on a file named after it in
// $TMPDIR/sluice-test-ports, held until the process exits (a kill -9 included). Without
// that, a port free for the moment its node was down was taken by another package's test
// and the restart failed "address already in use" (broker's TestClusterDeadLetterPowerCut
// in CI, beside the e2e packages).
const (
	stableLow  = 20000
	stableHigh = 32768 // the default ephemeral range starts here
)

var (
	portsMu   sync.Mutex
	handedOut = map[int]bool{} // under portsMu
	reserved  []*os.File       // the flocked files, open for the life of the process
)

// reserve takes port p for this process, across processes: false if another holds it.
// Where the lock directory cannot be made, the bind check alone stands.
func reserve(p int) bool {
	dir := filepath.Join(os.TempDir(), "sluice-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return true
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(p)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	reserved = append(reserved, f)
	return true
}

// StableAddr returns a 127.0.0.1 address below the ephemeral port range that was free
// when asked, for a server the test will start, stop and start again on it.
func StableAddr(t testing.TB) string {
	t.Helper()
	port, err := stablePort()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

func stablePort() (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 200 {
		p := stableLow + rand.IntN(stableHigh-stableLow)
		if handedOut[p] || !reserve(p) {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			handedOut[p] = true // someone's outside the tests: never again
			continue
		}
		l.Close()
		handedOut[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("testproc: no free port in %d-%d after 200 tries", stableLow, stableHigh-1)
}
