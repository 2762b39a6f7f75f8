package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/node"
	"github.com/sluice-mq/sluice/sluicetest"
)

// `sluice admin node` shows the node's disk and fsync health: after a durable send the
// fdatasync count is positive and its quantiles are ordered, and the disk is known.
func TestCLIAdminNode(t *testing.T) {
	srv := sluicetest.Start(t)
	c := client.New(srv.URL)
	if _, err := c.CreateQueue(t.Context(), "q", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(t.Context(), "q", []byte("x")); err != nil {
		t.Fatal(err)
	}
	var rep node.NodeReport
	if err := json.Unmarshal([]byte(mustCLI(t, srv.URL, "", "admin", "node", "-o", "json")), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.DiskSizeBytes == 0 || rep.DiskFreeBytes > rep.DiskSizeBytes || rep.DataDir == "" || rep.WriteFailure != "" {
		t.Errorf("disk: %+v", rep)
	}
	if f := rep.Fsync; f.Count == 0 || f.P50Seconds <= 0 || f.P99Seconds < f.P50Seconds || f.MeanSeconds <= 0 {
		t.Errorf("fsync after a durable send: %+v", f)
	}
	text := mustCLI(t, srv.URL, "", "admin", "node")
	for _, want := range []string{"disk", "free of", "fdatasync mean / p50 / p99", "accepted"} {
		if !strings.Contains(text, want) {
			t.Errorf("admin node lacks %q:\n%s", want, text)
		}
	}
}
