package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testproc"
)

// binary is the sluice binary TestMain builds once for every test.
var binary string

func TestMain(m *testing.M) {
	code := func() int {
		dir, err := os.MkdirTemp("", "sluice-e2e-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		binary = filepath.Join(dir, "sluice")
		if out, err := exec.Command("go", "build", "-o", binary, "../cmd/sluice").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

// proc is one running `sluice serve`.
type proc struct {
	*testproc.Proc
	t    *testing.T
	addr string // the HTTP listener, host:port
	url  string
}

// start runs `sluice serve` on dataDir with free ports and waits until it
// is ready. The process is killed at cleanup if the test did not stop it.
func start(t *testing.T, dataDir string, extra ...string) *proc {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the sluice binary")
	}
	args := append([]string{"--data-dir", dataDir, "--http-addr", "127.0.0.1:0",
		"--kafka-addr", "", "--sqs-addr", ""}, extra...)
	p := &proc{Proc: testproc.Serve(t, binary, args...), t: t}
	p.addr = p.Addr("http")
	p.url = "http://" + p.addr
	p.waitReady()
	return p
}

// waitReady polls /readyz: bounded, because it waits on another process.
func (p *proc) waitReady() {
	p.t.Helper()
	for range 200 {
		if code, _ := get(p.url + "/readyz"); code == 200 {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	p.t.Fatalf("sluice never became ready:\n%s", p.Logs())
}
