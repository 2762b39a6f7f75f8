package chaos

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testproc"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// post sends a JSON request and returns the status and body.
func post(t *testing.T, url, body string, hdr ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A full disk, for real: the data directory on a small tmpfs, filled
// through the native API until it refuses. Then every protocol answers in
// its own terms (native resource_exhausted STORAGE_FULL, SQS 503
// ServiceUnavailable, Kafka KAFKA_STORAGE_ERROR) with no server path in the
// message, /readyz says why it is not ready, acks still work, and deleting
// a queue through the API brings the broker back.
func TestDiskFull(t *testing.T) {
	dir := testproc.MountTmpfs(t, 24)
	p := serve(t, 0, "--data-dir", dir, "--disk-headroom", "2MiB", "--fsync", "always")
	api := "http://" + p.Addr("http") + "/sluice.v1."
	sqsURL := "http://" + p.Addr("sqs")
	for _, q := range []string{"keep", "filler"} {
		if code, body := post(t, api+"QueueService/CreateQueue", `{"name":"`+q+`"}`); code != 200 {
			t.Fatalf("create %s: %d %s", q, code, body)
		}
	}
	if code, body := post(t, api+"TopicService/CreateTopic", `{"name":"events"}`); code != 200 {
		t.Fatalf("create topic: %d %s", code, body)
	}
	send := func(q string, n int) (int, string) {
		body := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", n)))
		return post(t, api+"QueueService/Send", `{"queue":"`+q+`","message":{"body":"`+body+`"}}`)
	}
	for i := range 3 {
		if code, body := send("keep", 100); code != 200 {
			t.Fatalf("send %d: %d %s", i, code, body)
		}
	}
	// Fill the disk with 512 KiB messages until a send is refused.
	sent, code, body := 0, 200, ""
	for ; sent < 200 && code == 200; sent++ {
		code, body = send("filler", 512<<10)
	}
	t.Logf("filled the disk with %d messages of 512 KiB; the refusal: %d %s", sent-1, code, body)
	if code != 429 || !strings.Contains(body, "resource_exhausted") || !strings.Contains(body, "STORAGE_FULL") {
		t.Fatalf("native send on a full disk: %d %s, want 429 resource_exhausted STORAGE_FULL", code, body)
	}
	if strings.Contains(body, dir) {
		t.Errorf("the native answer names the data directory: %s", body)
	}
	status, ready := get(p.Addr("http"), "/readyz")
	if status != 503 || !strings.Contains(ready, "storage full") {
		t.Fatalf("/readyz on a full disk: %d %s", status, ready)
	}

	// SQS, in its own terms.
	code, body = post(t, sqsURL, `{"QueueUrl":"`+sqsURL+`/000000000000/keep","MessageBody":"x"}`,
		"X-Amz-Target", "AmazonSQS.SendMessage", "Content-Type", "application/x-amz-json-1.0")
	if code != 503 || !strings.Contains(body, "ServiceUnavailable") || strings.Contains(body, dir) {
		t.Fatalf("SQS send on a full disk: %d %s, want 503 ServiceUnavailable without a path", code, body)
	}
	// Kafka, in its own terms.
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr("kafka")), kgo.DisableIdempotentWrite(),
		kgo.RecordRetries(0), kgo.RecordDeliveryTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "events", Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("Kafka produce on a full disk: %v, want KAFKA_STORAGE_ERROR", err)
	}

	// Acks still work: receive and ack what "keep" holds.
	code, body = post(t, api+"QueueService/Receive", `{"queue":"keep","maxMessages":3}`)
	if code != 200 || strings.Count(body, `"receipt"`) != 3 {
		t.Fatalf("receive on a full disk: %d %s", code, body)
	}
	for _, part := range strings.Split(body, `"receipt":"`)[1:] {
		receipt := part[:strings.Index(part, `"`)]
		if code, ab := post(t, api+"QueueService/Ack", `{"queue":"keep","receipt":"`+receipt+`"}`); code != 200 {
			t.Fatalf("ack on a full disk: %d %s", code, ab)
		}
	}

	// Free space through the API: the broker is ready and takes sends again.
	if code, body := post(t, api+"QueueService/DeleteQueue", `{"name":"filler"}`); code != 200 {
		t.Fatalf("delete on a full disk: %d %s", code, body)
	}
	waitUntil(t, "/readyz once space was freed", func() bool {
		status, _ := get(p.Addr("http"), "/readyz")
		return status == 200
	})
	if code, body := send("keep", 100); code != 200 {
		t.Fatalf("send after freeing space: %d %s", code, body)
	}
	if logs := p.Logs(); strings.Count(logs, "disk full") != 1 || !strings.Contains(logs, "disk writable again") {
		t.Errorf("want one 'disk full' and one 'disk writable again' log line; logs:\n%s", logs)
	}
}
