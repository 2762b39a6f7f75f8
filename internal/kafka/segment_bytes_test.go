package kafka

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// segmentFiles counts the .log files of a topic's partition 0.
func segmentFiles(t *testing.T, dir, topic string) int {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "topics", "*-"+topic, "0", "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	return len(logs)
}

// TestSegmentBytesConfig: segment.bytes set by CreateTopics and by
// IncrementalAlterConfigs is reported by DescribeConfigs (the broker's
// --segment-bytes for a topic without one), refused with INVALID_CONFIG
// outside 4 KiB to 2 GiB-1, applied at the log's next roll without a
// restart, kept across a restart, and reset by a whole-state
// AlterConfigs that does not list it.
func TestSegmentBytesConfig(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir)
	adm := n.admin()
	ctx := testCtx(t, 30*time.Second)
	small := "4096"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": &small}, "small"); err != nil {
		t.Fatal(err)
	}
	n.createTopic("plain", 1)
	def := strconv.FormatInt(n.b.DefaultSegmentBytes(), 10)
	if v := topicConfigValue(t, adm, "small", "segment.bytes"); v != "4096" {
		t.Fatalf("small: segment.bytes %s", v)
	}
	if v := topicConfigValue(t, adm, "plain", "segment.bytes"); v != def {
		t.Fatalf("plain: segment.bytes %s, want the broker's %s", v, def)
	}
	for _, bad := range []string{"13", "4095", "2147483648", "big", "-1"} {
		resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": &bad}, "bad")
		if err == nil {
			err = resp.Err
		}
		if !errors.Is(err, kerr.InvalidConfig) {
			t.Fatalf("create with segment.bytes=%s: %v, want INVALID_CONFIG", bad, err)
		}
		rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "segment.bytes", Value: &bad}}, "plain")
		if err != nil || !errors.Is(rs[0].Err, kerr.InvalidConfig) {
			t.Fatalf("alter to segment.bytes=%s: %+v %v, want INVALID_CONFIG", bad, rs, err)
		}
	}
	cl := n.client(kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
	produce := func(topic string, k int) {
		t.Helper()
		for i := range k {
			r := &kgo.Record{Topic: topic, Value: []byte(strings.Repeat("x", 1000) + strconv.Itoa(i))}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce("small", 20)
	produce("plain", 20)
	if s, p := segmentFiles(t, dir, "small"), segmentFiles(t, dir, "plain"); s < 5 || p != 1 {
		t.Fatalf("after 20 KB: small has %d segments, plain %d; want at least 5 and 1", s, p)
	}
	rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "segment.bytes", Value: &small}}, "plain")
	if err != nil || rs[0].Err != nil {
		t.Fatalf("alter: %+v %v", rs, err)
	}
	produce("plain", 20)
	if p := segmentFiles(t, dir, "plain"); p < 5 {
		t.Fatalf("plain after segment.bytes=4096 and 20 KB more: %d segments, want the next roll at 4 KiB", p)
	}
	cl.Close()
	n.stop()
	n = startNode(t, dir)
	adm = n.admin()
	for _, topic := range []string{"small", "plain"} {
		if v := topicConfigValue(t, adm, topic, "segment.bytes"); v != "4096" {
			t.Fatalf("%s after a restart: segment.bytes %s", topic, v)
		}
	}
	cl = n.client(kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
	defer cl.Close()
	before := segmentFiles(t, dir, "small")
	produce("small", 10)
	if s := segmentFiles(t, dir, "small"); s < before+2 {
		t.Fatalf("small after a restart and 10 KB: %d segments, was %d", s, before)
	}
	// AlterConfigs (whole state) without segment.bytes: back to the default.
	retention := "3600000"
	if rs, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: &retention}}, "small"); err != nil || rs[0].Err != nil {
		t.Fatalf("alter state: %+v %v", rs, err)
	}
	if v := topicConfigValue(t, adm, "small", "segment.bytes"); v != strconv.FormatInt(n.b.DefaultSegmentBytes(), 10) {
		t.Fatalf("segment.bytes %s after a state alter without it", v)
	}
}
