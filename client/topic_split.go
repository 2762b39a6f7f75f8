package client

import (
	"context"
	"strconv"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Calls over several partitions of a cluster. A node forwards a call to the one node that
// leads what it names; a ListOffsets or a Fetch over partitions led by different nodes has
// no such node. The node answers NOT_LEADER (ListOffsets) or NOT_LEADER in each partition
// it does not lead (Fetch), and the client sends each of those partitions again on its own,
// concurrently, where one leader each is forwarded to. On a single node, or when one node
// leads all of them, nothing changes: one call.

// noNotLeaderRetry marks a call the NOT_LEADER retry (retry.go) leaves alone: a call over
// several partitions answered NOT_LEADER is split at once, not retried for seconds.
type noNotLeaderRetry struct{}

func withoutNotLeaderRetry(ctx context.Context) context.Context {
	return context.WithValue(ctx, noNotLeaderRetry{}, true)
}

// ListOffsets resolves earliest, latest or by-time offsets per partition (every partition
// when req names none), in the order of the partitions asked for.
func (c *Client) ListOffsets(ctx context.Context, req *ListOffsetsRequest) ([]*PartitionOffsetResult, error) {
	if len(req.GetPartitions()) == 1 {
		res, err := call(ctx, c.topic.ListOffsets, req)
		return res.GetPartitions(), err
	}
	res, err := call(withoutNotLeaderRetry(ctx), c.topic.ListOffsets, req)
	if err == nil || !isNotLeader(err) {
		return res.GetPartitions(), err
	}
	parts := req.GetPartitions()
	if len(parts) == 0 {
		t, err := c.DescribeTopic(ctx, req.GetTopic())
		if err != nil {
			return nil, err
		}
		for _, p := range t.GetPartitions() {
			parts = append(parts, p.GetPartition())
		}
	}
	out := make([]*PartitionOffsetResult, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Go(func() {
			one := proto.CloneOf(req)
			one.Partitions = []int32{p}
			res, err := call(ctx, c.topic.ListOffsets, one)
			if err == nil && len(res.GetPartitions()) != 1 {
				err = &Error{Reason: "INTERNAL", Message: "ListOffsets of one partition answered " + strconv.Itoa(len(res.GetPartitions()))}
			}
			if err != nil {
				errs[i] = err
				return
			}
			out[i] = res.GetPartitions()[0]
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Fetch reads records from offsets, long-polling up to req.MaxWait. Partitions the node
// answered NOT_LEADER for are fetched again one by one from their leaders (with the wait
// left, if nothing came yet, until one of them has records), and the whole answer keeps
// req.MaxRecords.
func (c *Client) Fetch(ctx context.Context, req *FetchRequest) (*FetchResponse, error) {
	began := time.Now()
	res, err := call(ctx, c.topic.Fetch, req)
	if err != nil || len(req.GetPartitions()) < 2 {
		return res, err
	}
	var again []int
	got := 0
	for i, pr := range res.GetPartitions() {
		if pr.GetError().GetReason() == "NOT_LEADER" {
			again = append(again, i)
		}
		got += len(pr.GetRecords())
	}
	if len(again) == 0 || len(res.GetPartitions()) != len(req.GetPartitions()) {
		return res, nil // answers are by position: one per partition asked for
	}
	wait := time.Duration(0)
	if got == 0 && req.GetMaxWait() != nil {
		wait = max(req.GetMaxWait().AsDuration()-time.Since(began), 0)
	}
	// A long poll ends at the first partition with records: the others' waits are cut,
	// and answer nothing, from where they were asked.
	pctx, cut := context.WithCancel(ctx)
	defer cut()
	var wg sync.WaitGroup
	for _, i := range again {
		wg.Go(func() {
			asked := req.GetPartitions()[i]
			one := proto.CloneOf(req)
			one.Partitions = []*PartitionOffset{asked}
			one.MaxWait = durationpb.New(wait)
			r, err := call(pctx, c.topic.Fetch, one)
			switch {
			case err != nil && pctx.Err() != nil && ctx.Err() == nil:
				res.Partitions[i] = &PartitionRecords{Partition: asked.GetPartition(), NextOffset: asked.GetOffset()}
			case err != nil || len(r.GetPartitions()) != 1:
				// the partition keeps its NOT_LEADER: the caller sees why
			default:
				res.Partitions[i] = r.GetPartitions()[0]
				if wait > 0 && len(r.GetPartitions()[0].GetRecords()) > 0 {
					cut() // never without a wait: every partition answers at once
				}
			}
		})
	}
	wg.Wait()
	trimToMaxRecords(res, req.GetMaxRecords())
	return res, nil
}

// trimToMaxRecords cuts res to limit records in all (0: the server's default, 500),
// keeping the first partitions' in order and moving each cut partition's next offset back
// to its first record left out.
func trimToMaxRecords(res *FetchResponse, limit int32) {
	if limit <= 0 {
		limit = 500
	}
	left := int(limit)
	for _, pr := range res.GetPartitions() {
		recs := pr.GetRecords()
		if len(recs) <= left {
			left -= len(recs)
			continue
		}
		pr.NextOffset = recs[left].GetOffset()
		pr.Records = recs[:left]
		left = 0
	}
}
