package kafka

import (
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testproc"
)

// kcat runs Debian's kcat (librdkafka 2.0) against the node. It skips the
// test when kcat is not installed (CI installs it: see docs/kafka.md).
func (n *node) kcat(stdin string, args ...string) string {
	n.t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		testproc.Missing(n.t, "kcat is not installed (apt-get install kcat)")
	}
	ctx := testCtx(n.t, 60*time.Second)
	cmd := exec.CommandContext(ctx, path, append([]string{"-b", n.addr}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		n.t.Fatalf("kcat %v: %v\nstderr:\n%s", args, err, errb.String())
	}
	return out.String()
}

func TestKcat(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		testproc.Missing(t, "kcat is not installed (apt-get install kcat)")
	}
	n := startNode(t, "")
	n.createTopic("kc", 4)
	if md := n.kcat("", "-L", "-t", "kc"); !strings.Contains(md, `topic "kc" with 4 partitions`) {
		t.Fatalf("kcat -L:\n%s", md)
	}
	var in strings.Builder
	var want []string
	for i := range 200 {
		line := fmt.Sprintf("key%d:value%d", i%7, i)
		in.WriteString(line + "\n")
		want = append(want, line)
	}
	n.kcat(in.String(), "-P", "-t", "kc", "-K:")
	out := n.kcat("", "-C", "-t", "kc", "-o", "beginning", "-e", "-K:", "-f", "%k:%s\n")
	got := strings.Split(strings.TrimSpace(out), "\n")
	checkPerKeyOrder(t, want, got)

	// Balanced consumer group: librdkafka's own JoinGroup/SyncGroup flow.
	out = n.kcat("", "-G", "kcgroup", "-o", "beginning", "-c", "200", "-f", "%k:%s\n", "kc")
	checkPerKeyOrder(t, want, strings.Split(strings.TrimSpace(out), "\n"))
}

// checkPerKeyOrder checks that got holds exactly the lines of want
// ("key:value"), and each key's values in want's order.
func checkPerKeyOrder(t *testing.T, want, got []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d: %q", len(got), len(want), got[:min(len(got), 5)])
	}
	byKey := func(lines []string) map[string][]string {
		m := map[string][]string{}
		for _, l := range lines {
			k, v, _ := strings.Cut(l, ":")
			m[k] = append(m[k], v)
		}
		return m
	}
	w, g := byKey(want), byKey(got)
	for k, vs := range w {
		if !slices.Equal(vs, g[k]) {
			t.Fatalf("key %s: got %q, want %q", k, g[k], vs)
		}
	}
}
