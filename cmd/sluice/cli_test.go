package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/sluicetest"
)

// cli runs one sluice command in-process against url, with stdin, and
// returns stdout, stderr and the error main would print.
func cli(t *testing.T, url, stdin string, args ...string) (string, string, error) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(append(args, "--server", url))
	err := root.ExecuteContext(t.Context())
	return out.String(), errOut.String(), err
}

func mustCLI(t *testing.T, url, stdin string, args ...string) string {
	t.Helper()
	out, _, err := cli(t, url, stdin, args...)
	if err != nil {
		t.Fatalf("sluice %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func TestCLIQueueLifecycle(t *testing.T) {
	srv := sluicetest.Start(t)
	u := srv.URL
	mustCLI(t, u, "", "queue", "create", "jobs-dlq")
	mustCLI(t, u, "", "queue", "create", "jobs", "--dead-letter-queue", "jobs-dlq", "--max-receives", "1", "--visibility-timeout", "1m")

	// A bulk send from stdin shows progress on stderr, results on stdout.
	var in strings.Builder
	for i := range 250 {
		in.WriteString(strings.Repeat("x", i%7+1) + "\n")
	}
	out, errOut, err := cli(t, u, in.String(), "queue", "send", "jobs", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var sent struct{ Results []struct{ MessageID string } }
	if json.Unmarshal([]byte(out), &sent) != nil || len(sent.Results) != 250 {
		t.Errorf("send -o json: %d results from %q", len(sent.Results), out[:min(len(out), 200)])
	}
	if !strings.Contains(errOut, "sent 250/250 (100%)") {
		t.Errorf("bulk send progress %q", errOut)
	}

	receipts := mustCLI(t, u, "", "queue", "receive", "jobs", "-n", "100", "-q")
	if n := len(strings.Fields(receipts)); n != 100 {
		t.Fatalf("receive -q: %d receipts", n)
	}
	if out := mustCLI(t, u, receipts, "queue", "ack", "jobs"); out != "acked 100\n" {
		t.Errorf("ack from stdin: %q", out)
	}
	// Acking the same receipts again fails with one line naming the reason.
	_, _, err = cli(t, u, receipts, "queue", "ack", "jobs")
	if err == nil || !strings.Contains(err.Error(), "RECEIPT_STALE") || strings.Contains(err.Error(), "\n") {
		t.Errorf("stale ack error %v: want one line with RECEIPT_STALE", err)
	}
	out = mustCLI(t, u, "", "queue", "describe", "jobs")
	for _, want := range [][]string{{"in", "flight", "0"}, {"acked", "100"}, {"visible", "150"}} {
		if !hasRow(out, want...) {
			t.Errorf("describe lacks %q:\n%s", want, out)
		}
	}
	if out := mustCLI(t, u, "", "queue", "purge", "jobs"); out != "purged 150\n" {
		t.Errorf("purge: %q", out)
	}
	mustCLI(t, u, "", "queue", "delete", "jobs")
	out = mustCLI(t, u, "", "queue", "list")
	if strings.Contains(out, "jobs ") || !strings.Contains(out, "jobs-dlq") {
		t.Errorf("list after delete:\n%s", out)
	}
}

func TestCLIErrorsAreOneLine(t *testing.T) {
	srv := sluicetest.Start(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"queue", "describe", "nope"}, "QUEUE_NOT_FOUND"},
		{[]string{"queue", "create", "bad name"}, "INVALID_NAME"},
		{[]string{"queue", "list", "-o", "yaml"}, "--output"},
		{[]string{"group", "reset-offsets", "g", "--topic", "t"}, "exactly one of"},
		{[]string{"topic", "consume", "missing"}, "TOPIC_NOT_FOUND"},
	} {
		_, _, err := cli(t, srv.URL, "", tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("sluice %v: %v; want one line containing %q", tc.args, err, tc.want)
		}
	}
	_, _, err := cli(t, "http://127.0.0.1:1", "", "queue", "list")
	if err == nil || !strings.Contains(err.Error(), "cannot reach the broker") {
		t.Errorf("unreachable server: %v", err)
	}
}

func TestCLIRedriveAndGroups(t *testing.T) {
	srv := sluicetest.Start(t)
	u := srv.URL
	mustCLI(t, u, "", "queue", "create", "w-dlq")
	mustCLI(t, u, "", "queue", "create", "w", "--dead-letter-queue", "w-dlq", "--max-receives", "1")
	mustCLI(t, u, "", "queue", "send", "w", "poison")
	// A 1ms visibility makes the next receive the second delivery, which
	// passes max-receives 1 and dead-letters the message.
	mustCLI(t, u, "", "queue", "receive", "w", "--visibility-timeout", "1ms")
	for deadline := time.Now().Add(10 * time.Second); ; {
		mustCLI(t, u, "", "queue", "receive", "w") // moves it to w-dlq once visible again
		if out := mustCLI(t, u, "", "dlq", "list"); hasRow(out, "w-dlq", "1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the message never reached the dead-letter queue:\n%s", mustCLI(t, u, "", "dlq", "list"))
		}
	}
	out := mustCLI(t, u, "", "dlq", "redrive", "w-dlq")
	if !hasRow(out, "redrive-id-any", "w-dlq", "(source", "queues)", "completed", "1", "1") {
		t.Errorf("redrive:\n%s", out)
	}
	if _, _, err := cli(t, u, "", "dlq", "cancel", "nope"); err == nil || !strings.Contains(err.Error(), "REDRIVE_NOT_FOUND") {
		t.Errorf("cancel unknown: %v", err)
	}

	mustCLI(t, u, "", "topic", "create", "orders", "--partitions", "2")
	mustCLI(t, u, "", "topic", "produce", "orders", "--partition", "0", "a", "b", "c")
	if out := mustCLI(t, u, "", "topic", "consume", "orders", "-g", "g1", "-q", "--wait", "100ms"); out != "a\nb\nc\n" {
		t.Errorf("consume with a group: %q", out)
	}
	if out := mustCLI(t, u, "", "topic", "consume", "orders", "-g", "g1", "-q", "--wait", "100ms"); out != "" {
		t.Errorf("second consume should resume after the commit: %q", out)
	}
	out = mustCLI(t, u, "", "group", "reset-offsets", "g1", "--topic", "orders", "--to-datetime", "2000-01-01T00:00:00Z")
	if !hasRow(out, "orders", "0", "0") {
		t.Errorf("reset to a datetime before everything:\n%s", out)
	}
	mustCLI(t, u, "", "group", "reset-offsets", "g1", "--topic", "orders", "--to-offset", "2")
	if out := mustCLI(t, u, "", "topic", "consume", "orders", "-g", "g1", "-q", "--wait", "100ms"); out != "c\n" {
		t.Errorf("consume after reset to offset 2: %q", out)
	}
	out = mustCLI(t, u, "", "group", "describe", "g1")
	if !hasRow(out, "orders", "0", "3", "3") {
		t.Errorf("describe:\n%s", out)
	}
	if out := mustCLI(t, u, "", "group", "list", "-o", "json"); !strings.Contains(out, `"group":"g1"`) {
		t.Errorf("group list json: %s", out)
	}
}

// hasRow reports whether a table line's columns start with cols, however
// the table aligned them. "redrive-id-any" matches any first column.
func hasRow(table string, cols ...string) bool {
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) < len(cols) {
			continue
		}
		ok := true
		for i, c := range cols {
			if c != "redrive-id-any" && f[i] != c {
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}
