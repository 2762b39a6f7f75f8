package kafka

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testproc"
)

// kgoTests is the -run pattern of franz-go's own kgo integration tests
// that TestFranzKgoSuite runs in CI: TestTxnEtl is franz-go's
// transactional consume-transform-produce chain (a transactional producer
// committing every 10,000 records, then three levels of
// GroupTransactSession ETL per balancer: range, cooperative-sticky, static
// members, and KIP-848 groups), the test issue 18 asks for; TestShareGroup*
// are its KIP-932 share consumer's tests (a three-level share-group ETL
// with accept, release, reject, consumers killed and added, delivery
// counts checked; acknowledgement on close; the share-group offset admin
// APIs), which issue 16 asks for with "any released client". Which others
// pass, and why the rest do not run, is in docs/kafka.md ("franz-go's own
// tests").
const kgoTests = "^(TestTxnEtl|TestShareGroup|TestShareGroupETL|TestShareGroupAckOnClose|TestShareGroupOffsetsAdmin)$"

// kgoRecords is how many records TestTxnEtl moves in CI: about 20 s on
// two cores. franz-go's default (500,000) is SLUICE_KGO_RECORDS=500000.
const kgoRecords = 50000

// TestFranzKgoSuite runs franz-go's kgo package tests (the version in
// go.mod, from the module cache, through `go test` in this module, so
// their imports resolve as ours do) against the built binary: their
// helpers find a broker through KGO_SEEDS, create topics with KGO_TEST_RF
// replicas and move KGO_TEST_RECORDS records. Their failure is ours;
// nothing is skipped but the -short run. SLUICE_KGO_TESTS replaces the
// -run pattern (docs/kafka.md lists what else passes), SLUICE_KGO_RECORDS
// the record count.
func TestFranzKgoSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary, and franz-go's tests")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("franz-go's tests need the go command: %v", err)
	}
	run, records := kgoTests, kgoRecords
	if s := os.Getenv("SLUICE_KGO_TESTS"); s != "" {
		run = s
	}
	if n, err := strconv.Atoi(os.Getenv("SLUICE_KGO_RECORDS")); err == nil && n > 0 {
		records = n
	}
	bin := testproc.Build(t, t.TempDir())
	proc := testproc.Serve(t, bin, "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0",
		"--kafka-addr", "127.0.0.1:0", "--sqs-addr", "")
	addr := proc.Addr("kafka")

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	// -count=1: a cached pass would not have talked to this broker.
	cmd := exec.CommandContext(ctx, goBin, "test", "-count=1", "-timeout=5m", "-v",
		"-run", run, "github.com/twmb/franz-go/pkg/kgo")
	cmd.Env = append(os.Environ(),
		"KGO_SEEDS="+addr,
		"KGO_TEST_RF=1", // one node
		"KGO_TEST_RECORDS="+strconv.Itoa(records),
		"KGO_LOG_LEVEL=none", // their clients' info logs: megabytes
		"KGO_TEST_CHAOS=",
	)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	passed := regexp.MustCompile(`(?m)^\s*--- PASS: (\S+)`).FindAllSubmatch(out, -1)
	t.Logf("franz-go's kgo tests (-run %q, %d records) in %v: %d passed", run, records, time.Since(start).Round(time.Second), len(passed))
	if err != nil {
		t.Fatalf("franz-go's tests failed: %v\nwhat ran and how it ended:\n%s\nthe broker afterwards:\n%s\nthe last lines:\n%s",
			err, outline(out), brokerState(addr), tail(out, 120))
	}
	// A pattern matching nothing passes `go test` with "no tests to
	// run": that would be a silent skip.
	if len(passed) == 0 || strings.Contains(string(out), "no tests to run") {
		t.Fatalf("franz-go's tests: nothing ran for -run %q\n%s", run, tail(out, 50))
	}
	// Their tests skip themselves when the broker does not announce what
	// they need (share groups: ShareFetch and ShareAcknowledge v2): a skip
	// here means something sluice served has gone.
	if skipped := regexp.MustCompile(`(?m)^\s*--- SKIP: (\S+)`).FindAllSubmatch(out, -1); len(skipped) > 0 {
		t.Fatalf("franz-go's tests skipped %d (the first: %s)\n%s", len(skipped), skipped[0][1], tail(out, 50))
	}
	if testing.Verbose() {
		for _, m := range passed {
			t.Logf("passed: %s", m[1])
		}
	}
	proc.Stop()
}

// brokerState is what the broker holds after a failed run, for the
// failure's message: each topic's end offsets beside its last stable
// offsets (a transaction left open shows as LSO < end), every group's
// committed offsets, and the transactions not complete. A hang leaves
// them as they were when franz-go's test process died.
func brokerState(addr string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err.Error()
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var b strings.Builder
	ends, err := adm.ListEndOffsets(ctx)
	fmt.Fprintf(&b, "end offsets (err %v):\n", err)
	stable, _ := adm.ListCommittedOffsets(ctx)
	var lines []string
	ends.Each(func(o kadm.ListedOffset) {
		lso, _ := stable.Lookup(o.Topic, o.Partition)
		lines = append(lines, fmt.Sprintf("  %s/%03d end %d lso %d\n", o.Topic, o.Partition, o.Offset, lso.Offset))
	})
	slices.Sort(lines)
	b.WriteString(strings.Join(lines, ""))
	groups, err := adm.ListGroups(ctx)
	fmt.Fprintf(&b, "groups (err %v):\n", err)
	for _, g := range groups.Sorted() {
		fmt.Fprintf(&b, "  %s %s %s:", g.Group, g.ProtocolType, g.State)
		committed, _ := adm.FetchOffsets(ctx, g.Group)
		committed.Each(func(o kadm.OffsetResponse) {
			fmt.Fprintf(&b, " %s/%d@%d", o.Topic, o.Partition, o.At)
		})
		b.WriteString("\n")
	}
	txns, err := adm.ListTransactions(ctx, nil, nil)
	fmt.Fprintf(&b, "transactions not complete (err %v):\n", err)
	for _, tx := range txns.Sorted() {
		if tx.State != "CompleteCommit" && tx.State != "CompleteAbort" && tx.State != "Empty" {
			fmt.Fprintf(&b, "  %s pid %d %s\n", tx.TxnID, tx.ProducerID, tx.State)
		}
	}
	return b.String()
}

// outline is what go test printed about the tests themselves: each test
// started and ended, failures' messages, and a timeout's panic with the
// tests it found still running. A hang's goroutine dump is thousands of
// lines; the tail alone does not say which test hung.
func outline(out []byte) string {
	var b strings.Builder
	inTimeout := false
	for line := range strings.Lines(string(out)) {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "panic: "):
			inTimeout = true
			b.WriteString(line)
		case inTimeout && (trimmed == "running tests:" || strings.HasPrefix(trimmed, "Test")):
			b.WriteString(line)
		case inTimeout && trimmed == "":
			inTimeout = false
		case strings.HasPrefix(trimmed, "=== RUN"), strings.HasPrefix(trimmed, "--- "),
			// a test's own message ("txn_test.go:305: saw double offset"),
			// not a stack frame's file ("/root/go/pkg/mod/…/txn_test.go:213 +0xf76")
			strings.Contains(trimmed, "_test.go:") && !strings.HasPrefix(trimmed, "/"):
			b.WriteString(line)
		}
	}
	return b.String()
}

// tail is the last n lines of out.
func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
