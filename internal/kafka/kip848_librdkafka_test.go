package kafka

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testproc"
)

// TestKIP848Librdkafka runs testdata/ckgo848 (confluent-kafka-go v2.11.1
// with its bundled librdkafka 2.11, group.protocol=consumer) against this
// node: three members over six partitions while records arrive, four of
// them replaced one at a time; then one new member resumes from the
// group's commits. Checked here: every record consumed (none skipped), the
// offsets committed at the end are the log ends, and the resumed member
// reads only what came after. The first run fetches the module and builds
// librdkafka's cgo binding (~20 s); later runs use the caches.
func TestKIP848Librdkafka(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to build testdata/ckgo848")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		testproc.Missing(t, "gcc is not installed (apt-get install gcc libc6-dev), which cgo needs to build confluent-kafka-go")
	}
	dir, err := filepath.Abs("testdata/ckgo848")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "ckgo848.test")
	ctx := testCtx(t, 4*time.Minute)
	build := exec.CommandContext(ctx, gobin, "test", "-c", "-o", bin, ".")
	build.Dir, build.Env = dir, moduleEnv()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building testdata/ckgo848: %v\n%s", err, out)
	}

	n := startConsumerNode(t, nil, kip848Config)
	n.createTopic("kc", 6)
	const total = 1800
	prod := n.client(kgo.DefaultProduceTopic("kc"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produced := make(chan error, 1)
	go func() { // over ~3 s, while members come and go
		for i := range total / 60 {
			if err := prod.ProduceSync(ctx, recordsN(60)...).FirstErr(); err != nil {
				produced <- fmt.Errorf("batch %d: %w", i, err)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		produced <- nil
	}()
	churn := runCkgo(t, ctx, n, bin, "TestChurn", total)
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	if got := distinct(churn); got != total {
		t.Fatalf("librdkafka consumed %d distinct records of %d", got, total)
	}
	for p := range int32(6) {
		if c, ok := n.b.FetchOffset("kg848", "kc", p); !ok || c.Offset != total/6 {
			t.Errorf("partition %d: committed %+v %v, want %d", p, c, ok, total/6)
		}
	}
	if err := prod.ProduceSync(ctx, recordsN(60)...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	resumed := runCkgo(t, ctx, n, bin, "TestResume", 60)
	for _, k := range resumed {
		var p int32
		var off int64
		if _, err := fmt.Sscanf(k, "%d/%d", &p, &off); err != nil || off < total/6 {
			t.Errorf("the resumed member read %s, from before the group's commits", k)
		}
	}
	t.Logf("churn: %d records in %d deliveries; resume: %d deliveries", total, len(churn), len(resumed))
}

// runCkgo runs one test of the built ckgo848 binary and returns the
// partition/offset of every record it consumed, in order.
func runCkgo(t *testing.T, ctx context.Context, n *node, bin, test string, total int) []string {
	t.Helper()
	out := filepath.Join(t.TempDir(), test+".out")
	cmd := exec.CommandContext(ctx, bin, "-test.run", "^"+test+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "SLUICE_KAFKA_ADDR="+n.addr, "SLUICE_GROUP=kg848", "SLUICE_TOPIC=kc",
		fmt.Sprintf("SLUICE_TOTAL=%d", total), "SLUICE_OUT="+out)
	log, err := cmd.CombinedOutput()
	if err != nil {
		got, _ := os.ReadFile(out)
		t.Fatalf("%s: %v\n%s\nmissing: %s\n%s", test, err, log, missing(strings.Fields(string(got)), total), groupState(n))
	}
	t.Logf("%s:\n%s", test, strings.TrimSpace(string(log)))
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

func distinct(keys []string) int {
	set := map[string]bool{}
	for _, k := range keys {
		set[k] = true
	}
	return len(set)
}

// moduleEnv is the environment for building a test module of its own: no
// workspace, and no GOFLAGS of the caller (-mod=vendor would not apply).
func moduleEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOFLAGS=") {
			env = append(env, kv)
		}
	}
	return append(env, "GOWORK=off", "GOFLAGS=-mod=readonly", "CGO_ENABLED=1")
}

// missing lists, per partition, the offsets below the log end that keys
// (partition/offset) does not have, when the run consumed fewer than total.
func missing(keys []string, total int) string {
	have := map[string]bool{}
	for _, k := range keys {
		have[k] = true
	}
	var out []string
	for p := range 6 {
		for off := range total / 6 {
			if k := fmt.Sprintf("%d/%d", p, off); !have[k] {
				out = append(out, k)
			}
		}
	}
	if len(out) > 20 {
		out = append(out[:20], "...")
	}
	return strings.Join(out, " ")
}

// groupState is the group as the coordinator holds it, and its commits.
func groupState(n *node) string {
	info, _ := n.b.DescribeGroup("kg848")
	var b strings.Builder
	fmt.Fprintf(&b, "group %s: state %v, epoch %d, assignment epoch %d\n", info.Type, info.State, info.Epoch, info.AssignmentEpoch)
	for _, m := range info.Members {
		fmt.Fprintf(&b, "  %s epoch %d %s: has %v, target %v, revoking %v, seen %s\n", m.MemberID, m.MemberEpoch, m.MemberState,
			m.Partitions, m.Target, m.Revoking, m.LastSeen.Format(time.StampMilli))
	}
	for _, o := range n.b.GroupOffsets("kg848") {
		fmt.Fprintf(&b, "  committed %s/%d: %d\n", o.Topic, o.Partition, o.Offset)
	}
	return b.String()
}
