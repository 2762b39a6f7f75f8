package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sluice-mq/sluice/sluicetest"
)

// These tests drive the CLI only through its command line, so each also
// runs against the CLI before issue 20's fixes (each failed there).

// cliCtx is cli with the caller's context: a cancelled context is Ctrl-C.
func cliCtx(ctx context.Context, t *testing.T, url, stdin string, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(append(args, "--server", url))
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

// oneJSON decodes out as exactly one JSON document, numbers kept as
// json.Number.
func oneJSON(t *testing.T, out string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if dec.More() {
		t.Fatalf("more than one JSON document:\n%s", out)
	}
	return v
}

// path walks a decoded document: strings index objects, ints arrays.
func path(t *testing.T, v any, keys ...any) any {
	t.Helper()
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("%v is not an object at %q", v, k)
			}
			if v, ok = m[k]; !ok {
				t.Fatalf("key %q missing from %v", k, m)
			}
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				t.Fatalf("%v has no element %d", v, k)
			}
			v = l[k]
		}
	}
	return v
}

func TestCLIDLQListJSONIsOneDocument(t *testing.T) {
	u := sluicetest.Start(t).URL
	mustCLI(t, u, "", "queue", "create", "w-dlq")
	mustCLI(t, u, "", "queue", "create", "w", "--dead-letter-queue", "w-dlq", "--max-receives", "1")
	doc := oneJSON(t, mustCLI(t, u, "", "dlq", "list", "-o", "json"))
	if name := path(t, doc, "deadLetterQueues", 0, "name"); name != "w-dlq" {
		t.Errorf("deadLetterQueues[0].name = %v", name)
	}
	if _, ok := path(t, doc, "redrives").([]any); !ok {
		t.Errorf("redrives is not an array: %v", doc)
	}
}

func TestCLIJSONHasZeroValuesAndNumbers(t *testing.T) {
	u := sluicetest.Start(t).URL
	mustCLI(t, u, "", "topic", "create", "t")
	doc := oneJSON(t, mustCLI(t, u, "", "topic", "produce", "t", "--partition", "0", "a", "-o", "json"))
	// Partition 0 and offset 0 are there, as numbers.
	if p := path(t, doc, "results", 0, "partition"); p != json.Number("0") {
		t.Errorf("partition = %#v, want the number 0", p)
	}
	if o := path(t, doc, "results", 0, "offset"); o != json.Number("0") {
		t.Errorf("offset = %#v, want the number 0 (proto's JSON makes int64 a string)", o)
	}
	mustCLI(t, u, "", "topic", "produce", "t", "b")
	doc = oneJSON(t, mustCLI(t, u, "", "topic", "describe", "t", "-o", "json"))
	if hw := path(t, doc, "partitions", 0, "highWatermark"); hw != json.Number("2") {
		t.Errorf("highWatermark = %#v, want the number 2", hw)
	}
	doc = oneJSON(t, mustCLI(t, u, "", "queue", "create", "q", "-o", "json"))
	if v := path(t, doc, "queues", 0, "stats", "visible"); v != json.Number("0") {
		t.Errorf("stats.visible = %#v, want the number 0", v)
	}
	// Commands that printed nothing or a non-document now print one.
	for _, args := range [][]string{{"queue", "delete", "q"}, {"topic", "consume", "t", "--from-beginning", "--wait", "100ms"}} {
		oneJSON(t, mustCLI(t, u, "", append(args, "-o", "json")...))
	}
}

func TestCLIReceiveOfLargeBodyIsNotPadded(t *testing.T) {
	u := sluicetest.Start(t).URL
	mustCLI(t, u, "", "queue", "create", "big")
	body := strings.Repeat("x", 300<<10)
	mustCLI(t, u, "", "queue", "send", "big", body)
	out := mustCLI(t, u, "", "queue", "receive", "big")
	if len(out) > len(body)+1024 {
		t.Errorf("receive of a %d-byte body printed %d bytes: the table pads to the body's width", len(body), len(out))
	}
	if !strings.Contains(out, body) {
		t.Error("the body is not in the output")
	}
}

func TestCLIFlagsCheckedWithServerLimits(t *testing.T) {
	u := sluicetest.Start(t).URL
	mustCLI(t, u, "", "queue", "create", "q-dlq")
	mustCLI(t, u, "", "queue", "create", "q")
	mustCLI(t, u, "", "queue", "send", "q", "one", "two")
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"queue", "receive", "q", "-n", "0"}, "--max"},
		{[]string{"queue", "receive", "q", "-n", "101"}, "--max"},
		{[]string{"queue", "receive", "q", "--wait", "21s"}, "--wait"},
		{[]string{"queue", "create", "q2", "--dead-letter-queue", "q-dlq", "--max-receives", "-1"}, "--max-receives"},
		{[]string{"queue", "create", "q3", "--dead-letter-queue", "q-dlq", "--max-receives", "1001"}, "--max-receives"},
		{[]string{"queue", "create", "q4", "--max-receives", "-1"}, "--max-receives"},
		{[]string{"queue", "create", "q5", "--visibility-timeout", "13h"}, "--visibility-timeout"},
		{[]string{"topic", "create", "t0", "--partitions", "0"}, "--partitions"},
		{[]string{"topic", "create", "t1", "--partitions", "10001"}, "--partitions"},
		{[]string{"topic", "consume", "t1", "--wait", "31s"}, "--wait"},
		{[]string{"queue", "send", "q", "--dedup-id", "d1", "a", "b"}, "--dedup-id"},
		{[]string{"dlq", "redrive", "q-dlq", "--rate", "-1"}, "--rate"},
	} {
		_, _, err := cli(t, u, "", tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("sluice %s: %v; want a refusal naming %s", strings.Join(tc.args, " "), err, tc.flag)
		}
	}
	// Nothing the refusals were about happened.
	if out := mustCLI(t, u, "", "topic", "list"); strings.Contains(out, "t0") || strings.Contains(out, "t1") {
		t.Errorf("a refused topic exists:\n%s", out)
	}
	if out := mustCLI(t, u, "", "queue", "list"); !hasRow(out, "q", "2", "0") {
		t.Errorf("the refused receives or send changed q:\n%s", out)
	}
}

func TestCLIResetOffsetsOfUnknownGroup(t *testing.T) {
	u := sluicetest.Start(t).URL
	mustCLI(t, u, "", "topic", "create", "t")
	_, _, err := cli(t, u, "", "group", "reset-offsets", "nosuchgroup", "--topic", "t", "--to-earliest")
	if err == nil || !strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), "--create") {
		t.Errorf("reset of an unknown group: %v; want a refusal that names --create", err)
	}
	if out := mustCLI(t, u, "", "group", "list"); strings.Contains(out, "nosuchgroup") {
		t.Errorf("the refused reset created the group:\n%s", out)
	}
	mustCLI(t, u, "", "group", "reset-offsets", "newgroup", "--topic", "t", "--to-earliest", "--create")
	if out := mustCLI(t, u, "", "group", "list"); !strings.Contains(out, "newgroup") {
		t.Errorf("--create did not position the group:\n%s", out)
	}
}

func TestCLIErrorTexts(t *testing.T) {
	u := sluicetest.Start(t).URL
	mustCLI(t, u, "", "queue", "create", "q")
	mustCLI(t, u, "", "queue", "send", "q", "a", "b")
	r := strings.Fields(mustCLI(t, u, "", "queue", "receive", "q", "-n", "2", "-q"))
	// One bad receipt among good ones: the others are acked, and said so.
	out, _, err := cli(t, u, "", "queue", "ack", "q", r[0], "bogus", r[1])
	if err == nil || strings.Contains(err.Error(), "RECEIPT_INVALID: RECEIPT_INVALID") || !strings.Contains(err.Error(), "RECEIPT_INVALID") {
		t.Errorf("ack of a bad receipt: %v; want RECEIPT_INVALID said once", err)
	}
	if out != "acked 2\n" {
		t.Errorf("ack with one bad receipt printed %q, want acked 2", out)
	}
	_, _, err = cli(t, u, "", "dlq", "redrive", "q")
	if err == nil || strings.Contains(err.Error(), "destination_queue") || !strings.Contains(err.Error(), "--to") {
		t.Errorf("redrive of a queue that is no dead-letter queue: %v; want it to name --to", err)
	}
	_, _, err = cli(t, u, "", "queue", "create", "q", "--visibility-timeout", "1m")
	if err == nil || !strings.Contains(err.Error(), "queue update") {
		t.Errorf("create with other settings: %v; want the next step (queue update)", err)
	}
}

func TestCLIServerWithoutScheme(t *testing.T) {
	u := sluicetest.Start(t).URL
	hostPort := strings.TrimPrefix(u, "http://")
	if _, _, err := cli(t, hostPort, "", "queue", "list"); err != nil {
		t.Errorf("--server %s: %v", hostPort, err)
	}
	if _, _, err := cli(t, "ftp://x", "", "queue", "list"); err == nil || !strings.Contains(err.Error(), "--server") {
		t.Errorf("--server ftp://x: %v; want a refusal naming --server", err)
	}
}

// TestCLIUsageHasNoBacktickArtefacts: pflag takes the first `word` in a
// usage string as the value's name in --help, so a backquoted command in
// a usage string printed as "-q, --quiet sluice queue ack".
func TestCLIUsageHasNoBacktickArtefacts(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		check := func(fl *pflag.Flag) {
			name, usage := pflag.UnquoteUsage(fl)
			if strings.ContainsAny(name, " `") || strings.Contains(usage, "`") {
				t.Errorf("%s --%s: value name %q, usage %q", c.CommandPath(), fl.Name, name, usage)
			}
		}
		c.LocalFlags().VisitAll(check)
		c.PersistentFlags().VisitAll(check)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
}

func TestCLIVersionAndCompletion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(args)
		if err := root.Execute(); err != nil || !strings.HasPrefix(out.String(), "sluice ") || !strings.Contains(out.String(), "go1.") {
			t.Errorf("sluice %v: %q, %v", args, out.String(), err)
		}
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs([]string{"completion", shell})
		if err := root.Execute(); err != nil || !strings.Contains(out.String(), "sluice") {
			t.Errorf("completion %s: %v, %d bytes", shell, err, out.Len())
		}
	}
	root := newRootCmd()
	var help bytes.Buffer
	root.SetOut(&help)
	root.SetArgs([]string{"--help"})
	if err := root.Execute(); err != nil || !strings.Contains(help.String(), "completion") {
		t.Errorf("--help does not list completion:\n%s", help.String())
	}
}

func TestCLISendFileAsOneMessage(t *testing.T) {
	u := sluicetest.Start(t).URL
	mustCLI(t, u, "", "queue", "create", "files")
	body := []byte("line one\n\n\tline three\x00\xff\n")
	file := filepath.Join(t.TempDir(), "body.bin")
	if err := os.WriteFile(file, body, 0o600); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, u, "", "queue", "send", "files", "--file", file)
	mustCLI(t, u, string(body), "queue", "send", "files", "--file", "-")
	doc := oneJSON(t, mustCLI(t, u, "", "queue", "receive", "files", "-n", "10", "--ack", "-o", "json"))
	msgs := path(t, doc, "messages").([]any)
	if len(msgs) != 2 {
		t.Fatalf("%d messages, want 2 (one per --file)", len(msgs))
	}
	for i := range msgs {
		got, _ := base64.StdEncoding.DecodeString(path(t, msgs[i], "body").(string))
		if !bytes.Equal(got, body) {
			t.Errorf("message %d: body %q, want the file's bytes %q", i, got, body)
		}
	}
}

func TestCLIConsumeQuietPrintsRawBytes(t *testing.T) {
	u := sluicetest.Start(t).URL
	mustCLI(t, u, "", "topic", "create", "t")
	mustCLI(t, u, "", "topic", "produce", "t", `say "hi"`+"\tnow", "é")
	out := mustCLI(t, u, "", "topic", "consume", "t", "--from-beginning", "-q", "--wait", "100ms")
	if want := "say \"hi\"\tnow\né\n"; out != want {
		t.Errorf("consume -q = %q, want the raw values %q", out, want)
	}
}

func TestCLIConsumeFollow(t *testing.T) {
	u := sluicetest.Start(t).URL
	mustCLI(t, u, "", "topic", "create", "t", "--partitions", "2")
	mustCLI(t, u, "", "topic", "produce", "t", "--partition", "0", "a", "b")
	// Records produced while it follows arrive; -n bounds it.
	done := make(chan string, 1)
	go func() {
		out, err := cliCtx(t.Context(), t, u, "", "topic", "consume", "t", "--from-beginning", "--follow", "-n", "4", "-q", "-g", "f")
		if err != nil {
			out = "error: " + err.Error()
		}
		done <- out
	}()
	// Once it has committed a and b it is following: only then come c and d.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if out, _, _ := cli(t, u, "", "group", "describe", "f"); hasRow(out, "t", "0", "2") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the follow never committed a and b")
		}
	}
	mustCLI(t, u, "", "topic", "produce", "t", "--partition", "1", "c", "d")
	select {
	case out := <-done:
		if strings.Count(out, "\n") != 4 || !strings.Contains(out, "c\n") || !strings.Contains(out, "d\n") {
			t.Errorf("follow -n 4 printed %q", out)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("follow -n 4 did not end after 4 records")
	}
	// It committed as it went: the group is at the end.
	if out := mustCLI(t, u, "", "group", "describe", "f"); !hasRow(out, "t", "0", "2", "2", "0") || !hasRow(out, "t", "1", "2", "2", "0") {
		t.Errorf("follow did not commit:\n%s", out)
	}
	// Ctrl-C (the context ending) ends a follow without an error.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second) // ample for 4 records; the follow then waits
	defer cancel()
	out, err := cliCtx(ctx, t, u, "", "topic", "consume", "t", "--from-beginning", "--follow", "-o", "json")
	if err != nil || strings.Count(out, "\n") != 4 {
		t.Errorf("follow until Ctrl-C: %v, output %q; want 4 JSON lines", err, out)
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		oneJSON(t, l)
	}
}
