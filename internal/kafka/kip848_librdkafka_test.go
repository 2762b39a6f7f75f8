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
	churn := runCkgo(t, ctx, bin, n.addr, "TestChurn", total)
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
	resumed := runCkgo(t, ctx, bin, n.addr, "TestResume", 60)
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
func runCkgo(t *testing.T, ctx context.Context, bin, addr, test string, total int) []string {
	t.Helper()
	out := filepath.Join(t.TempDir(), test+".out")
	cmd := exec.CommandContext(ctx, bin, "-test.run", "^"+test+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "SLUICE_KAFKA_ADDR="+addr, "SLUICE_GROUP=kg848", "SLUICE_TOPIC=kc",
		fmt.Sprintf("SLUICE_TOTAL=%d", total), "SLUICE_OUT="+out)
	log, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", test, err, log)
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
