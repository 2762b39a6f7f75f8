package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/sluice-mq/sluice/internal/group"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// TestProduceConsumeCrashUnderLoad cuts the power while producers and a
// group consumer run: every record acknowledged before the cut is in the
// log after it, and no partition's committed offset is below one a commit
// was acknowledged for.
func TestProduceConsumeCrashUnderLoad(t *testing.T) {
	e := newEnv(t, nil)
	e.createTopic("load", 4)
	ctx := context.Background()
	type acked struct {
		p   int32
		off int64
		val string
	}
	var mu sync.Mutex // guards records and commits
	var records []acked
	commits := map[int32]int64{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 400 {
				select {
				case <-stop:
					return
				default:
				}
				v := fmt.Sprintf("w%d-%d", w, i)
				res, err := e.b.Produce(ctx, "load", []ProduceRecord{{Key: []byte(v), Value: []byte(v)}}, ProduceOptions{})
				if err != nil {
					return
				}
				mu.Lock()
				records = append(records, acked{res[0].Partition, res[0].Offset, v})
				mu.Unlock()
			}
		})
	}
	wg.Go(func() {
		a, err := e.b.JoinConsumer(ctx, ConsumerJoin{Group: "g", ClientID: "c", Topics: []string{"load"}, SessionTimeout: testSession})
		if err != nil {
			t.Error(err)
			return
		}
		pos := map[int32]int64{}
		for range 2000 {
			select {
			case <-stop:
				return
			default:
			}
			for p := range int32(4) {
				res, err := e.b.Fetch(ctx, "load", p, pos[p], FetchOptions{MaxBytes: 2048})
				if err != nil {
					return
				}
				if recs := decodeBatches(t, res.Batches); len(recs) > 0 {
					pos[p] = recs[len(recs)-1].Offset + 1
				}
				errs, err := e.b.CommitOffsets(ctx, group.CommitRequest{Group: "g", MemberID: a.MemberID, Generation: a.Generation,
					Offsets: []group.OffsetCommit{{Topic: "load", Partition: p, Offset: pos[p]}}})
				if err = errors.Join(err, errors.Join(errs...)); err != nil {
					return
				}
				mu.Lock()
				commits[p] = pos[p]
				mu.Unlock()
			}
		}
	})
	eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(records) >= 300 })
	mu.Lock()
	wantRecords := append([]acked(nil), records...)
	wantCommits := map[int32]int64{}
	for p, o := range commits {
		wantCommits[p] = o
	}
	mu.Unlock()
	clone := e.fs.(*vfs.MemFS).CrashClone()
	close(stop)
	wg.Wait()

	e.b.Close()
	e.fs = clone
	e.open()
	byPart := map[int32]map[int64]string{}
	for p := range int32(4) {
		byPart[p] = map[int64]string{}
		for _, r := range e.fetchAll("load", p, 0) {
			byPart[p][r.Offset] = string(r.Value)
		}
	}
	for _, r := range wantRecords {
		if got := byPart[r.p][r.off]; got != r.val {
			t.Fatalf("acknowledged record %s at %d/%d lost: found %q", r.val, r.p, r.off, got)
		}
	}
	for p, want := range wantCommits {
		got, ok := e.b.FetchOffset("g", "load", p)
		if !ok || got.Offset < want {
			t.Fatalf("partition %d: committed %d after the crash, %d was acknowledged", p, got.Offset, want)
		}
	}
	t.Logf("%d acknowledged records and %d partitions' commits checked", len(wantRecords), len(wantCommits))
}
