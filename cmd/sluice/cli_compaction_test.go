package main

import (
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/sluicetest"
)

// TestCLICompactedTopic: --cleanup-policy reaches the broker through the
// native API (and back in describe), a keyless produce to a compacted topic
// is refused, a keyed one is stored, and an unknown policy is refused
// before any request.
func TestCLICompactedTopic(t *testing.T) {
	u := sluicetest.Start(t).URL
	out := mustCLI(t, u, "", "topic", "create", "state", "--cleanup-policy", "delete,compact", "-o", "json")
	if !strings.Contains(out, "CLEANUP_POLICY_COMPACT_DELETE") {
		t.Fatalf("create --cleanup-policy delete,compact:\n%s", out)
	}
	if out := mustCLI(t, u, "", "topic", "describe", "state", "-o", "json"); !strings.Contains(out, "CLEANUP_POLICY_COMPACT_DELETE") {
		t.Fatalf("describe:\n%s", out)
	}
	if _, _, err := cli(t, u, "", "topic", "produce", "state", "no-key"); err == nil || !strings.Contains(err.Error(), "key") {
		t.Fatalf("keyless produce to a compacted topic: %v", err)
	}
	mustCLI(t, u, "", "topic", "produce", "state", "--key", "k", "v")
	if _, _, err := cli(t, u, "", "topic", "create", "x", "--cleanup-policy", "compaction"); err == nil || !strings.Contains(err.Error(), "--cleanup-policy") {
		t.Fatalf("unknown policy: %v", err)
	}
}
