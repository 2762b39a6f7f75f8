package node_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/client"
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
