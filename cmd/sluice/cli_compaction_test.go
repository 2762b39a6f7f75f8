package main

import (
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-mq/sluice/client"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
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

// TestNativeCompactionConfig: the native API's compaction fields are set at
// creation (an explicit 0 kept as 0, not the default), reported back with
// the defaults filled in, and refused out of range.
func TestNativeCompactionConfig(t *testing.T) {
	srv := sluicetest.Start(t)
	c := client.New(srv.URL)
	ctx := t.Context()
	ratio := 0.0
	cfg := &client.TopicConfig{CleanupPolicy: sluicev1.CleanupPolicy_CLEANUP_POLICY_COMPACT,
		DeleteRetention: durationpb.New(0), MinCompactionLag: durationpb.New(time.Minute), MinCleanableDirtyRatio: &ratio}
	tp, err := c.CreateTopic(ctx, "state", cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := tp.GetConfig()
	if got.GetDeleteRetention().AsDuration() != 0 || got.GetMinCompactionLag().AsDuration() != time.Minute ||
		got.GetMinCleanableDirtyRatio() != 0 || got.MaxCompactionLag != nil {
		t.Fatalf("created config %v", got)
	}
	tp, err = c.CreateTopic(ctx, "defaults", &client.TopicConfig{CleanupPolicy: sluicev1.CleanupPolicy_CLEANUP_POLICY_COMPACT})
	if err != nil {
		t.Fatal(err)
	}
	if got := tp.GetConfig(); got.GetDeleteRetention().AsDuration() != 24*time.Hour || got.GetMinCleanableDirtyRatio() != 0.5 {
		t.Fatalf("defaults %v", got)
	}
	bad := 1.5
	for _, cfg := range []*client.TopicConfig{{MinCleanableDirtyRatio: &bad}, {DeleteRetention: durationpb.New(-time.Second)},
		{MaxCompactionLag: durationpb.New(0)}} {
		if _, err := c.CreateTopic(ctx, "bad", cfg); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("%v: %v, want invalid_argument", cfg, err)
		}
	}
}
