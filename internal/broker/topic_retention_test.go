package broker

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// TestRetentionCutReusedBriefly: the time cut is computed again only every hundredth of
// the retention (at most a minute): records that expire just after a pass are kept until
// the next computation, never deleted early, and expire once it is due.
func TestRetentionCutReusedBriefly(t *testing.T) {
	clock := newClock()
	b, err := Open(Options{Dir: "/d", FS: vfs.NewMem(), Now: clock.Now, Logger: quietLogger(), SegmentBytes: 4096, HeadroomBytes: testHeadroom})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.CreateTopic(TopicSettings{Name: "t", Retention: time.Hour}); err != nil {
		t.Fatal(err)
	}
	produce := func(n int) {
		for range n {
			if _, err := b.Produce(context.Background(), "t", []ProduceRecord{{Value: make([]byte, 1000)}}, ProduceOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	start := func() int64 { info, _ := b.DescribeTopic("t"); return info.Partitions[0].LogStartOffset }
	produce(20) // several segments of 4 KiB
	clock.Advance(time.Hour - time.Second)
	produce(1)
	b.Maintain() // nothing is an hour old: the cut is the start, kept for 36 s
	if s := start(); s != 0 {
		t.Fatalf("start %d before anything is an hour old", s)
	}
	clock.Advance(2 * time.Second) // the first 20 are now past the retention
	b.Maintain()
	if s := start(); s != 0 {
		t.Fatalf("start %d: the cut of 2 s ago was not reused (retentionEvery(1h) = %v)", s, retentionEvery(time.Hour))
	}
	clock.Advance(retentionEvery(time.Hour))
	b.Maintain()
	if s := start(); s == 0 || s > 20 {
		t.Fatalf("start %d once the cut was due again, want the expired segments gone (at most 20)", s)
	}
	if retentionEvery(7*24*time.Hour) != time.Minute || retentionEvery(time.Second) != 10*time.Millisecond {
		t.Fatalf("retentionEvery: 7 days %v, 1 s %v", retentionEvery(7*24*time.Hour), retentionEvery(time.Second))
	}
}
