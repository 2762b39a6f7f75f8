package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/testproc"
)

// tourScript returns the shell blocks of README.md's tour, in order, as one
// script. The README is the source: this test runs what a reader copies.
func tourScript(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	start := strings.Index(readme, "## A 5-minute tour")
	if start < 0 {
		t.Fatal(`README.md has no "## A 5-minute tour" section`)
	}
	section := readme[start+3:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var script []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1) {
		script = append(script, m[1])
	}
	if len(script) < 4 {
		t.Fatalf("found %d sh blocks in the tour, want at least 4", len(script))
	}
	return strings.Join(script, "\n")
}

// TestReadmeTour runs the README's tour verbatim against a fresh broker,
// with two substitutions a test needs: the broker listens on a free port
// instead of 8080 (its address replaces 127.0.0.1:8080, and SLUICE_SERVER
// points the CLI at it), and `go build -o sluice` is replaced by the binary
// this package already built.
func TestReadmeTour(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		testproc.Missing(t, "the tour uses curl, which is not installed (apt-get install curl)")
	}
	p := start(t, t.TempDir())
	work := t.TempDir()
	if err := os.Symlink(binary, filepath.Join(work, "sluice")); err != nil {
		t.Fatal(err)
	}
	script := tourScript(t)
	script = regexp.MustCompile(`(?m)^go build -o sluice \./cmd/sluice.*$`).ReplaceAllString(script, ": built by the test")
	script = strings.ReplaceAll(script, "127.0.0.1:8080", p.addr)

	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "SLUICE_SERVER="+p.url)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tour failed: %v\n%s\nbroker log:\n%s", err, out, p.Logs())
	}
	got := string(out)
	for _, want := range []string{
		"hello", "world", "acked 3", // the CLI's receive and ack
		`"messageId"`, "{}", // curl's send and ack
		`cust-1  {"total":42}`,                                                      // produce and consume
		"\n{\"total\":42}\n{\"total\":7}\n",                                         // consume --follow -q: raw values, one per line
		`sluice_queue_messages{queue="emails",state="inflight"} 2`,                  // hello and world, never acked
		`sluice_queue_acked_total{queue="emails"} 4`,                                // three by the CLI, one by curl
		`sluice_group_lag_messages{group="billing",partition="1",topic="orders"} 2`, // after the reset
	} {
		if !strings.Contains(got, want) {
			t.Errorf("tour output lacks %q:\n%s", want, got)
		}
	}
}
