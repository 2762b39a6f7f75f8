package e2e

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDeleteRecordsSurvivesLeaderKill: three processes, a topic replicated on all three,
// 20 records produced with acks=all; kadm's DeleteRecords to offset 8 answers low
// watermark 8 (the partition's leader applied it, every replica will), the leader is
// killed with SIGKILL, and the new leader answers log start 8 too: a consumer from the
// beginning reads offsets 8 to 19 and nothing below, before and after the killed node
// comes back.
func TestDeleteRecordsSurvivesLeaderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three sluice processes")
	}
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := kadm.NewClient(c.client())
	const topic = "trimmed"
	createTopic(ctx, t, adm, topic, 1, 3)
	prod := c.client(kgo.DefaultProduceTopic(topic))
	for i := range 20 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	off := kadm.Offsets{}
	off.Add(kadm.Offset{Topic: topic, Partition: 0, At: 8})
	rs, err := adm.DeleteRecords(ctx, off)
	if err != nil || rs[topic][0].Err != nil || rs[topic][0].LowWatermark != 8 {
		t.Fatalf("DeleteRecords to 8: %+v %v", rs, err)
	}
	checkFrom := func(when string) {
		t.Helper()
		for {
			starts, err := adm.ListStartOffsets(ctx, topic)
			if err == nil {
				if o, ok := starts.Lookup(topic, 0); ok && o.Err == nil && o.Offset == 8 {
					break
				}
			}
			if ctx.Err() != nil {
				t.Fatalf("%s: log start never 8: %+v %v", when, starts, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		cons := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		var got []string
		for len(got) < 12 {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("%s: read %v before the deadline", when, got)
			}
			fs.EachRecord(func(r *kgo.Record) { got = append(got, fmt.Sprintf("%d=%s", r.Offset, r.Value)) })
		}
		cons.Close()
		if got[0] != "8=8" || got[11] != "19=19" || len(got) != 12 {
			t.Fatalf("%s: a consumer from the start read %v, want offsets 8 to 19", when, got)
		}
	}
	checkFrom("on the leader")
	l := c.leaderOf(ctx, adm, topic, 0)
	if l == 0 {
		t.Fatal("no leader for the partition")
	}
	c.kill(l)
	checkFrom(fmt.Sprintf("after node %d, the leader, was killed", l))
	c.start(l)
	checkFrom(fmt.Sprintf("after node %d came back", l))
}
