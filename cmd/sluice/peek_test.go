package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/sluicetest"
)

// queue peek shows messages without receiving them (a receive afterwards
// still gets each with receive count 1); dlq preview counts what the
// redrive with the same flags then moves; their limits are checked.
func TestCLIPeekAndPreview(t *testing.T) {
	srv := sluicetest.Start(t)
	u := srv.URL
	mustCLI(t, u, "", "queue", "create", "jobs-dlq")
	mustCLI(t, u, "", "queue", "create", "jobs", "--dead-letter-queue", "jobs-dlq", "--max-receives", "1", "--visibility-timeout", "1s")
	mustCLI(t, u, "one\ntwo\nthree\n", "queue", "send", "jobs")

	out, errOut, err := cli(t, u, "", "queue", "peek", "jobs", "-n", "2")
	if err != nil || !strings.Contains(out, "one") || !strings.Contains(out, "two") || strings.Contains(out, "three") ||
		!strings.Contains(out, "visible") || !strings.Contains(errOut, "more from --from 2") {
		t.Fatalf("peek -n 2: %q %q %v", out, errOut, err)
	}
	var page struct {
		Messages []struct {
			State   string
			Message struct{ Body string }
		}
		NextSequence int
	}
	out = mustCLI(t, u, "", "queue", "peek", "jobs", "--from", "2", "-o", "json")
	if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Messages) != 1 || page.Messages[0].State != "MESSAGE_STATE_VISIBLE" || page.NextSequence != 3 {
		t.Fatalf("peek -o json: %q (%v)", out, err)
	}
	if out := mustCLI(t, u, "", "queue", "receive", "jobs", "-n", "3"); strings.Count(out, " 1 ") != 3 {
		t.Errorf("receive after peeks: %q, want three first receives", out)
	}

	mustCLI(t, u, "x\n", "queue", "send", "jobs-dlq") // no source queue: unroutable without --to
	out = mustCLI(t, u, "", "dlq", "preview", "jobs-dlq")
	if !strings.Contains(out, "would move 1 of 1 messages") || !strings.Contains(out, "with no source queue") {
		t.Errorf("preview: %q", out)
	}
	out = mustCLI(t, u, "", "dlq", "preview", "jobs-dlq", "--to", "jobs", "--sample", "0")
	if !strings.Contains(out, "1 to jobs") || strings.Contains(out, "BODY") {
		t.Errorf("preview --to --sample 0: %q", out)
	}
	for _, args := range [][]string{
		{"queue", "peek", "jobs", "-n", "0"},
		{"queue", "peek", "jobs", "-n", "101"},
		{"dlq", "preview", "jobs-dlq", "--sample", "-1"},
		{"dlq", "preview", "jobs-dlq", "--limit", "-1"},
	} {
		if _, _, err := cli(t, u, "", args...); err == nil || !strings.Contains(err.Error(), "want") {
			t.Errorf("sluice %s: %v, want a range error", strings.Join(args, " "), err)
		}
	}
}
