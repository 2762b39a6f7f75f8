package main

import (
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/testproc"
)

// TestServeRefusesDataDirInUse: a second `sluice serve` on a data directory
// that a running one holds exits at once with code 1 and one line naming the
// directory and the reason; the first keeps serving and stops cleanly.
func TestServeRefusesDataDirInUse(t *testing.T) {
	bin := buildBinary(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	flags := []string{"--data-dir", dataDir, "--http-addr", "127.0.0.1:0", "--kafka-addr", "", "--sqs-addr", ""}
	first := testproc.Serve(t, bin, flags...)
	// Ready means the broker is open, so it holds the directory.
	waitForStatus(t, "http://"+first.Addr("http")+"/readyz", http.StatusOK)

	out, err := exec.Command(bin, append([]string{"serve"}, flags...)...).CombinedOutput()
	if exitErr, ok := err.(*exec.ExitError); !ok || exitErr.ExitCode() != 1 {
		t.Fatalf("second serve: exit %v, want code 1; output:\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "sluice: ") || !strings.Contains(last, dataDir) || !strings.Contains(last, "another sluice process holds it") {
		t.Errorf("second serve's last line %q: want it to name %s and say another sluice process holds it", last, dataDir)
	}
	first.Stop()
}
