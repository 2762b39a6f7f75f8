package kafka

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/broker"
)

// TestKadmDeleteRecords: kadm DeleteRecords moves a partition's log start inside a
// segment (and to the high watermark with -1); the low watermark answered is what
// ListOffsets earliest, a consumer from the start and a fetch below it see, across a
// restart; a subscription of the topic drops its records below it, leased ones included;
// an offset past the high watermark and an unknown topic are refused, changing nothing.
func TestKadmDeleteRecords(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir)
	n.createTopic("dr", 2)
	ctx := testCtx(t, 60*time.Second)
	cl := n.client(kgo.DefaultProduceTopic("dr"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 50 { // one batch per record, all in one segment
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.b.CreateSubscription(broker.SubscriptionSettings{Topic: "dr", Name: "audit", FromEarliest: true}); err != nil {
		t.Fatal(err)
	}
	leased, err := n.b.SubscriptionReceive(ctx, "dr", "audit", broker.ReceiveOptions{Max: 5, Visibility: time.Hour})
	if err != nil || len(leased) != 5 || leased[0].Offset != 0 {
		t.Fatalf("subscription receive before: %+v %v", leased, err)
	}

	adm := n.admin()
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "dr", Partition: 0, At: 30})
	offs.Add(kadm.Offset{Topic: "dr", Partition: 1, At: -1})
	rs, err := adm.DeleteRecords(ctx, offs)
	if err != nil {
		t.Fatal(err)
	}
	if r := rs["dr"][0]; r.Err != nil || r.LowWatermark != 30 {
		t.Fatalf("partition 0: %+v", r)
	}
	if r := rs["dr"][1]; r.Err != nil || r.LowWatermark != 0 {
		t.Fatalf("partition 1 (empty, -1): %+v", r)
	}

	checkStart := func(when string) {
		t.Helper()
		starts, err := adm.ListStartOffsets(ctx, "dr")
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := starts.Lookup("dr", 0); o.Offset != 30 {
			t.Fatalf("%s: ListOffsets earliest %d, want 30", when, o.Offset)
		}
		if _, err := n.b.Fetch(ctx, "dr", 0, 29, broker.FetchOptions{}); !errors.Is(err, broker.ErrOffsetOutOfRange) {
			t.Fatalf("%s: fetch at 29: %v, want out of range", when, err)
		}
		c := n.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"dr": {0: kgo.NewOffset().AtStart()}}))
		var got []int64
		for len(got) < 20 {
			fs := c.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatalf("%s: consume: %v", when, err)
			}
			fs.EachRecord(func(r *kgo.Record) { got = append(got, r.Offset) })
		}
		if got[0] != 30 || got[19] != 49 {
			t.Fatalf("%s: consumed from the start %v, want 30..49", when, got)
		}
	}
	checkStart("after DeleteRecords")

	// The subscription goes on at 30: the deleted records, leased or not, are gone.
	next, err := n.b.SubscriptionReceive(ctx, "dr", "audit", broker.ReceiveOptions{Max: 100, Visibility: time.Hour})
	if err != nil || len(next) != 20 || next[0].Offset != 30 {
		t.Fatalf("subscription receive after: %d records from %v, %v", len(next), next, err)
	}

	for _, tc := range []struct {
		topic string
		at    int64
		want  error
	}{
		{"dr", 51, kerr.OffsetOutOfRange}, // past the high watermark (50)
		{"nope", 1, kerr.UnknownTopicOrPartition},
	} {
		var o kadm.Offsets
		o.Add(kadm.Offset{Topic: tc.topic, Partition: 0, At: tc.at})
		rs, err := adm.DeleteRecords(ctx, o)
		if err == nil {
			err = rs[tc.topic][0].Err
		}
		if !errors.Is(err, tc.want) {
			t.Fatalf("DeleteRecords %s at %d: %v, want %v", tc.topic, tc.at, err, tc.want)
		}
	}
	// A compact-only topic keeps every key's latest value: POLICY_VIOLATION, as in Kafka.
	if resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, "drc"); err != nil || resp.Err != nil {
		t.Fatalf("create compacted topic: %v %v", err, resp.Err)
	}
	var comp kadm.Offsets
	comp.Add(kadm.Offset{Topic: "drc", Partition: 0, At: -1})
	if rs, err := adm.DeleteRecords(ctx, comp); err != nil || !errors.Is(rs["drc"][0].Err, kerr.PolicyViolation) {
		t.Fatalf("DeleteRecords on a compact-only topic: %+v %v", rs, err)
	}
	// Lower than the start: nothing changes, the start is answered.
	var low kadm.Offsets
	low.Add(kadm.Offset{Topic: "dr", Partition: 0, At: 10})
	if rs, err := adm.DeleteRecords(ctx, low); err != nil || rs["dr"][0].LowWatermark != 30 {
		t.Fatalf("DeleteRecords below the start: %+v %v", rs, err)
	}

	n.stop()
	n = startNode(t, dir)
	adm = n.admin()
	checkStart("after a restart")
}
