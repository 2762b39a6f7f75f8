package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/sluicetest"
)

// The commands issue 20 found missing, each through what it changes.

func TestCLITopicDeleteAddPartitionsOffsets(t *testing.T) {
	u := sluicetest.Start(t).URL
	mustCLI(t, u, "", "topic", "create", "t", "--partitions", "2")
	if out := mustCLI(t, u, "", "topic", "add-partitions", "t", "--partitions", "4"); !hasRow(out, "t", "4") {
		t.Errorf("add-partitions:\n%s", out)
	}
	if _, _, err := cli(t, u, "", "topic", "add-partitions", "t", "--partitions", "3"); err == nil || !strings.Contains(err.Error(), "PARTITIONS_CANNOT_SHRINK") {
		t.Errorf("shrinking: %v", err)
	}
	mustCLI(t, u, "", "topic", "produce", "t", "--partition", "3", "a", "b")
	if out := mustCLI(t, u, "", "topic", "offsets", "t"); !hasRow(out, "3", "2") || !hasRow(out, "0", "0") {
		t.Errorf("offsets (latest):\n%s", out)
	}
	if out := mustCLI(t, u, "", "topic", "offsets", "t", "--earliest", "--partitions", "3"); !hasRow(out, "3", "0") || hasRow(out, "0", "0") {
		t.Errorf("offsets --earliest --partitions 3:\n%s", out)
	}
	if out := mustCLI(t, u, "", "topic", "delete", "t"); out != "deleted t\n" {
		t.Errorf("delete: %q", out)
	}
	if _, _, err := cli(t, u, "", "topic", "describe", "t"); err == nil || !strings.Contains(err.Error(), "TOPIC_NOT_FOUND") {
		t.Errorf("describe after delete: %v", err)
	}
}

func TestCLIQueueUpdate(t *testing.T) {
	u := sluicetest.Start(t).URL
	mustCLI(t, u, "", "queue", "create", "q-dlq")
	mustCLI(t, u, "", "queue", "create", "q")
	mustCLI(t, u, "", "queue", "update", "q", "--visibility-timeout", "2m", "--dead-letter-queue", "q-dlq", "--max-receives", "4")
	out := mustCLI(t, u, "", "queue", "describe", "q")
	for _, want := range [][]string{{"visibility", "timeout", "2m0s"}, {"dead-letter", "queue", "q-dlq"}, {"max", "receives", "4"}} {
		if !hasRow(out, want...) {
			t.Errorf("after update, describe lacks %q:\n%s", want, out)
		}
	}
	// --max-receives alone keeps the dead-letter queue; other settings stay.
	mustCLI(t, u, "", "queue", "update", "q", "--max-receives", "7")
	out = mustCLI(t, u, "", "queue", "describe", "q")
	if !hasRow(out, "max", "receives", "7") || !hasRow(out, "dead-letter", "queue", "q-dlq") || !hasRow(out, "visibility", "timeout", "2m0s") {
		t.Errorf("after --max-receives 7:\n%s", out)
	}
	mustCLI(t, u, "", "queue", "update", "q", "--no-dead-letter")
	if out := mustCLI(t, u, "", "queue", "describe", "q"); !hasRow(out, "max", "receives", "0") {
		t.Errorf("after --no-dead-letter:\n%s", out)
	}
	if _, _, err := cli(t, u, "", "queue", "update", "q"); err == nil || !strings.Contains(err.Error(), "at least one setting") {
		t.Errorf("update without settings: %v", err)
	}
}

func TestCLINackExtendConsume(t *testing.T) {
	u := sluicetest.Start(t).URL
	mustCLI(t, u, "", "queue", "create", "q", "--visibility-timeout", "10m")
	mustCLI(t, u, "", "queue", "send", "q", "a")
	r := strings.TrimSpace(mustCLI(t, u, "", "queue", "receive", "q", "-q"))
	if out := mustCLI(t, u, "", "queue", "extend", "q", r, "--visibility-timeout", "20m"); !strings.Contains(out, r) {
		t.Errorf("extend: %q", out)
	}
	if _, _, err := cli(t, u, "", "queue", "extend", "q", r); err == nil || !strings.Contains(err.Error(), "--visibility-timeout") {
		t.Errorf("extend without a timeout: %v", err)
	}
	if out := mustCLI(t, u, "", "queue", "nack", "q", r, "--reason", "try later"); out != "nacked 1\n" {
		t.Errorf("nack: %q", out)
	}
	// Nacked, it is visible at once: a stream delivers it, for the second time.
	out := mustCLI(t, u, "", "queue", "consume", "q", "-n", "1", "--ack", "-o", "json")
	var m struct {
		Body         string
		ReceiveCount json.Number
	}
	if err := json.Unmarshal([]byte(out), &m); err != nil || m.Body != "YQ==" || m.ReceiveCount != "2" {
		t.Errorf("consume after nack: %q (%v)", out, err)
	}
	if out := mustCLI(t, u, "", "queue", "describe", "q"); !hasRow(out, "acked", "1") {
		t.Errorf("consume --ack did not ack:\n%s", out)
	}
}

func TestCLISubscriptions(t *testing.T) {
	u := sluicetest.Start(t).URL
	mustCLI(t, u, "", "topic", "create", "orders")
	mustCLI(t, u, "", "topic", "produce", "orders", "early")
	mustCLI(t, u, "", "topic", "subscription", "create", "orders", "billing", "--from-earliest", "--visibility-timeout", "1m")
	mustCLI(t, u, "", "topic", "sub", "create", "orders", "audit")
	mustCLI(t, u, "", "topic", "produce", "orders", "late")
	out := mustCLI(t, u, "", "topic", "subscription", "list", "orders")
	if !hasRow(out, "orders/billing", "2") || !hasRow(out, "orders/audit", "1") {
		t.Errorf("list:\n%s", out)
	}
	if out := mustCLI(t, u, "", "queue", "receive", "orders/billing", "-n", "10", "--ack"); !strings.Contains(out, "early") || !strings.Contains(out, "late") {
		t.Errorf("receive of the subscription:\n%s", out)
	}
	if out := mustCLI(t, u, "", "topic", "subscription", "describe", "orders", "billing"); !hasRow(out, "orders/billing", "0", "0") {
		t.Errorf("describe after the acks:\n%s", out)
	}
	mustCLI(t, u, "", "topic", "subscription", "delete", "orders", "audit")
	if _, _, err := cli(t, u, "", "topic", "subscription", "describe", "orders", "audit"); err == nil || !strings.Contains(err.Error(), "SUBSCRIPTION_NOT_FOUND") {
		t.Errorf("describe after delete: %v", err)
	}
}

func TestCLIRedriveStatusAndSources(t *testing.T) {
	u := sluicetest.Start(t).URL
	mustCLI(t, u, "", "queue", "create", "w-dlq")
	mustCLI(t, u, "", "queue", "create", "w", "--dead-letter-queue", "w-dlq", "--max-receives", "1")
	if out := mustCLI(t, u, "", "dlq", "sources", "w-dlq"); !hasRow(out, "w") {
		t.Errorf("sources:\n%s", out)
	}
	mustCLI(t, u, "", "queue", "create", "elsewhere")
	out := mustCLI(t, u, "", "dlq", "redrive", "w-dlq", "--to", "elsewhere", "-o", "json")
	var r struct{ ID string }
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.ID == "" {
		t.Fatalf("redrive -o json: %q (%v)", out, err)
	}
	if out := mustCLI(t, u, "", "dlq", "status", r.ID); !hasRow(out, r.ID, "w-dlq", "elsewhere", "completed") {
		t.Errorf("status:\n%s", out)
	}
	if out := mustCLI(t, u, "", "dlq", "redrives", "w-dlq"); !hasRow(out, r.ID) {
		t.Errorf("redrives:\n%s", out)
	}
}
