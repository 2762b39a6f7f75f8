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

// TestTxnLibrdkafka: librdkafka's transactional producer (through
// confluent-kafka-python, as Debian ships it) commits, aborts and commits
// again; its read_committed consumer sees the committed records only, its
// read_uncommitted one all of them.
func TestTxnLibrdkafka(t *testing.T) {
	python, err := exec.LookPath("/usr/bin/python3")
	if err != nil {
		testproc.Missing(t, "python3 is not installed")
	}
	if exec.Command(python, "-c", "import confluent_kafka").Run() != nil {
		testproc.Missing(t, "python module confluent_kafka is not installed (apt-get install python3-confluent-kafka)")
	}
	n := startNode(t, "")
	n.createTopic("pytx", 2)
	const count = 50
	ctx := testCtx(t, 120*time.Second)
	cmd := exec.CommandContext(ctx, python, "testdata/pytxn.py", n.addr, "pytx", fmt.Sprint(count))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("pytxn.py: %v\nstderr:\n%s", err, errb.String())
	}
	var committed []string
	uncommitted := ""
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if rest, ok := strings.CutPrefix(line, "committed "); ok {
			committed = strings.Fields(rest)
		}
		if rest, ok := strings.CutPrefix(line, "uncommitted "); ok {
			uncommitted = rest
		}
	}
	var want []string
	for i := range count {
		want = append(want, fmt.Sprintf("commit-%d", i))
	}
	want = append(want, "commit-last")
	slices.Sort(want)
	slices.Sort(committed)
	if !slices.Equal(committed, want) {
		t.Fatalf("read_committed got %d records %v, want the %d committed", len(committed), committed, len(want))
	}
	if uncommitted != fmt.Sprint(2*count+1) {
		t.Fatalf("read_uncommitted got %s records, want %d\n%s", uncommitted, 2*count+1, errb.String())
	}
}
