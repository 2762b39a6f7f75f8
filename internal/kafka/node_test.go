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

// TestNodeClient drives @platformatic/kafka (testdata/node, pinned by its
// package-lock.json), a Node client that implements only Kafka 3.5+
// protocol versions, through testdata/node/client.mjs: CreateTopics v7,
// produce, a consumer group (FindCoordinator v4+, OffsetFetch v8+),
// commits, a reset to earliest committed as -2 and read back, a group
// resuming from it, IncrementalAlterConfigs, DeleteTopics. It installs the
// package with `npm ci` (from npm's cache when offline) and skips when
// node or npm is missing.
func TestNodeClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		testproc.Missing(t, "node is not installed (apt-get install nodejs)")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		testproc.Missing(t, "npm is not installed (apt-get install npm)")
	}
	// @platformatic/kafka 1.35 needs Node 20.19 or later (2.x: 22.22).
	if v, err := exec.Command(node, "-p", "process.versions.node").Output(); err != nil || !nodeAtLeast(strings.TrimSpace(string(v)), 20, 19) {
		testproc.Missing(t, fmt.Sprintf("node %s is older than 20.19, which @platformatic/kafka needs", strings.TrimSpace(string(v))))
	}
	ctx := testCtx(t, 3*time.Minute)
	install := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error")
	install.Dir = "testdata/node"
	if out, err := install.CombinedOutput(); err != nil {
		testproc.Missing(t, fmt.Sprintf("npm ci failed (no registry and no cache?): %v\n%s", err, out))
	}
	n := startNode(t, "")
	const count = 60
	cmd := exec.CommandContext(ctx, node, "client.mjs", n.addr, "nodetopic", "nodegroup", fmt.Sprint(count))
	cmd.Dir = "testdata/node"
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("node client: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var recs, committed []string
	for _, l := range lines {
		if r, ok := strings.CutPrefix(l, "rec "); ok {
			recs = append(recs, r)
		}
		if c, ok := strings.CutPrefix(l, "committed "); ok {
			committed = append(committed, c)
		}
	}
	var want []string
	for i := range count {
		want = append(want, fmt.Sprintf("key%d:node-%d", i%7, i))
	}
	checkPerKeyOrder(t, want, recs)
	slices.Sort(committed)
	for _, l := range []string{"created nodetopic 3", fmt.Sprintf("reread %d", count), "config retention.ms 3600000", "deleted"} {
		if !slices.Contains(lines, l) {
			t.Errorf("no line %q in:\n%s", l, out.String())
		}
	}
	if strings.Join(committed, ",") != "0 -2,1 -2,2 -2" {
		t.Errorf("committed after the reset: %q, want -2 on each partition", committed)
	}
}

// nodeAtLeast reports whether version ("20.20.2") is at least major.minor.
func nodeAtLeast(version string, major, minor int) bool {
	var ma, mi int
	if _, err := fmt.Sscanf(version, "%d.%d", &ma, &mi); err != nil {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}
