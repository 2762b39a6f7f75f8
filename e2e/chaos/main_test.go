package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sluice-mq/sluice/internal/testproc"
)

// sluiceBin is the sluice binary TestMain builds once.
var sluiceBin string

func TestMain(m *testing.M) {
	code := func() int {
		dir, err := os.MkdirTemp("", "sluice-chaos-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		sluiceBin = filepath.Join(dir, "sluice")
		if out, err := exec.Command("go", "build", "-o", sluiceBin, "github.com/sluice-mq/sluice/cmd/sluice").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

// long reports whether the long form was asked for.
func long() bool { return os.Getenv("SLUICE_CHAOS_LONG") != "" }

// serve runs `sluice serve` on a fresh data directory with every listener
// on a free port and the given flags; nofile > 0 runs it under that
// RLIMIT_NOFILE (soft and hard, as `ulimit -n` sets them), through a shell
// so this test process keeps its own limit. It returns once /readyz says
// ready.
func serve(t *testing.T, nofile int, flags ...string) *testproc.Proc {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the sluice binary")
	}
	bin := sluiceBin
	if nofile > 0 {
		bin = filepath.Join(t.TempDir(), "sluice-ulimit")
		script := fmt.Sprintf("#!/bin/sh\nulimit -n %d || exit 111\nexec %q \"$@\"\n", nofile, sluiceBin)
		if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	args := append([]string{"--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0",
		"--kafka-addr", "127.0.0.1:0", "--sqs-addr", "127.0.0.1:0", "--fsync", "never"}, flags...)
	p := testproc.Serve(t, bin, args...)
	for _, l := range []string{"http", "kafka", "sqs"} {
		p.Addr(l)
	}
	waitUntil(t, "sluice to be ready", func() bool {
		status, _ := get(p.Addr("http"), "/readyz")
		return status == 200
	})
	return p
}
