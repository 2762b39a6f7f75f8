package node_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/server"
	"github.com/sluice-mq/sluice/sluicetest"
)

// The metrics Source adapts the broker's group lag and retention headroom,
// not only queue stats: a lagging group and a topic with time retention
// show up on /metrics.
func TestMetricsCarryGroupLagAndHeadroom(t *testing.T) {
	srv := sluicetest.Start(t)
	c := client.New(srv.URL)
	ctx := t.Context()
	if _, err := c.CreateTopic(ctx, "events", nil); err != nil {
		t.Fatal(err)
	}
	recs := []*client.ProduceRecord{{Value: []byte("a")}, {Value: []byte("b")}, {Value: []byte("c")}}
	if _, err := c.Produce(ctx, "events", recs, nil); err != nil {
		t.Fatal(err)
	}
	// A tool's commit (no member, generation -1): the group is 2 behind.
	if err := c.CommitOffsets(ctx, "reporting", "", -1, []*client.CommittedOffset{{Topic: "events", Partition: 0, Offset: 1}}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	body := string(b)
	for _, want := range []string{
		`sluice_group_lag_messages{group="reporting",partition="0",topic="events"} 2`,
		`sluice_group_lag_seconds{group="reporting",partition="0",topic="events"}`,
		`sluice_topic_retention_headroom_seconds{topic="events"}`,
		"\nsluice_storage_disk_free_bytes ",
		"\nsluice_storage_disk_size_bytes ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// Kafka and SQS requests are timed in sluice_request_duration_seconds as
// native ones are: per API key, per action, with the protocol label; an
// action no one serves is "unknown", never the client's string.
func TestRequestMetricsCoverKafkaAndSQS(t *testing.T) {
	srv := startNode(t)
	ctx := t.Context()
	c := client.New("http://" + srv.Addr(server.HTTP))
	if _, err := c.CreateTopic(ctx, "events", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateQueue(ctx, "jobs", nil); err != nil {
		t.Fatal(err)
	}
	kc, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr(server.Kafka)), kgo.DefaultProduceTopic("events"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	if err := kc.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("kafka produce: %v", err)
	}
	sqsCall := func(action, body string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+srv.Addr(server.SQS), strings.NewReader(body))
		req.Header.Set("X-Amz-Target", "AmazonSQS."+action)
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("sqs %s: %v", action, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	url := "http://" + srv.Addr(server.SQS) + "/000000000000/jobs"
	sqsCall("SendMessage", `{"QueueUrl":"`+url+`","MessageBody":"hi"}`)
	sqsCall("SendMessage", `{"QueueUrl":"`+url+`","MessageBody":"again"}`)
	sqsCall("NoSuchAction", `{}`)

	wants := []string{
		`sluice_request_duration_seconds_count{operation="Produce",protocol="kafka"} 1`,
		`sluice_request_duration_seconds_count{operation="Metadata",protocol="kafka"}`,
		`sluice_request_duration_seconds_count{operation="ApiVersions",protocol="kafka"}`,
		`sluice_request_duration_seconds_count{operation="SendMessage",protocol="sqs"} 2`,
		`sluice_request_duration_seconds_count{operation="unknown",protocol="sqs"} 1`,
		`sluice_request_duration_seconds_count{operation="CreateQueue",protocol="native"} 1`,
	}
	// A request is timed when its handler returns, which may be just after
	// the client read the answer: scrape until every series is there
	// (bounded), then check them all.
	var body string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		body = scrape(t, "http://"+srv.Addr(server.HTTP)+"/metrics")
		missing := false
		for _, want := range wants {
			missing = missing || !strings.Contains(body, want)
		}
		if !missing || time.Now().After(deadline) {
			break
		}
	}
	for _, want := range wants {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(body, "NoSuchAction") {
		t.Error("/metrics labels a series with an action the client made up")
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
