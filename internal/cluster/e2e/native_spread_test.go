package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-mq/sluice/client"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
	"github.com/sluice-mq/sluice/proto/sluice/v1/sluicev1connect"
)

// checkReadsAcrossLeaders: the topic "spread" has three partitions led by three nodes
// and one record in partition 0 (checkPartlyWritten). After one record more in each of the
// others (single-partition produces, forwarded), a ListOffsets of every partition and a
// Fetch of all three, through every node, answer for all of them — made with the Go client
// and with a plain Connect client generated from the protos (as any other language's
// would be): the node answers what it leads and asks each other leader for the rest
// (internal/api/topic_fanout.go). Before, the plain client got NOT_LEADER for the
// partitions the node did not lead, and `sluice topic consume` and `topic offsets` failed
// on any multi-partition topic of a cluster whose leaders were spread. Then a long-polled
// Fetch at the end of all three, through the leader of partition 0, is answered when a
// record reaches partition 2, led by another node, not when the wait ends.
func checkReadsAcrossLeaders(ctx context.Context, t *testing.T, c *cluster, via int) {
	t.Helper()
	for p := int32(1); p < 3; p++ {
		if _, err := c.native(via).Produce(ctx, "spread", []*client.ProduceRecord{{Value: []byte("y"), Partition: &p}}, nil); err != nil {
			t.Fatalf("produce to spread/%d through node %d: %v", p, via, err)
		}
	}
	all := []*client.PartitionOffset{{Partition: 0}, {Partition: 1}, {Partition: 2}}
	for id := 1; id <= 3; id++ {
		plain := c.plainTopics(id)
		for _, how := range []string{"the Go client", "a plain Connect client"} {
			var offs []*sluicev1.PartitionOffsetResult
			var res *sluicev1.FetchResponse
			var oerr, ferr error
			if how == "the Go client" {
				offs, oerr = c.native(id).ListOffsets(ctx, &client.ListOffsetsRequest{Topic: "spread",
					Spec: &sluicev1.ListOffsetsRequest_Latest{Latest: true}})
				res, ferr = c.native(id).Fetch(ctx, &client.FetchRequest{Topic: "spread", MaxWait: durationpb.New(0), Partitions: all})
			} else {
				var o *connect.Response[sluicev1.ListOffsetsResponse]
				if o, oerr = plain.ListOffsets(ctx, withToken(&sluicev1.ListOffsetsRequest{Topic: "spread",
					Spec: &sluicev1.ListOffsetsRequest_Latest{Latest: true}})); oerr == nil {
					offs = o.Msg.GetPartitions()
				}
				var f *connect.Response[sluicev1.FetchResponse]
				if f, ferr = plain.Fetch(ctx, withToken(&sluicev1.FetchRequest{Topic: "spread", MaxWait: durationpb.New(0), Partitions: all})); ferr == nil {
					res = f.Msg
				}
			}
			if oerr != nil || len(offs) != 3 {
				t.Fatalf("ListOffsets of every partition through node %d, %s: %v, %v", id, how, offs, oerr)
			}
			for i, o := range offs {
				if o.GetPartition() != int32(i) || o.GetOffset() != 1 {
					t.Fatalf("ListOffsets through node %d, %s: %v, want every partition at 1", id, how, offs)
				}
			}
			if ferr != nil {
				t.Fatalf("fetch of three partitions through node %d, %s: %v", id, how, ferr)
			}
			for i, pr := range res.GetPartitions() {
				if pr.GetError() != nil || pr.GetPartition() != int32(i) || len(pr.GetRecords()) != 1 || pr.GetNextOffset() != 1 {
					t.Fatalf("fetch through node %d, %s: partition %d answered %v", id, how, i, pr)
				}
			}
		}
	}

	// A long poll through node via (it leads partition 0) wakes for partition 2's record.
	polled := make(chan error, 1)
	began := time.Now()
	go func() {
		at := []*client.PartitionOffset{{Partition: 0, Offset: 1}, {Partition: 1, Offset: 1}, {Partition: 2, Offset: 1}}
		res, err := c.plainTopics(via).Fetch(ctx, withToken(&sluicev1.FetchRequest{Topic: "spread", MaxWait: durationpb.New(20 * time.Second), Partitions: at}))
		if err == nil && (len(res.Msg.GetPartitions()) != 3 || len(res.Msg.GetPartitions()[2].GetRecords()) != 1) {
			err = fmt.Errorf("answered %v, want partition 2's record", res.Msg.GetPartitions())
		}
		polled <- err
	}()
	time.Sleep(500 * time.Millisecond) // the poll is waiting on every leader
	p2 := int32(2)
	if _, err := c.native(via).Produce(ctx, "spread", []*client.ProduceRecord{{Value: []byte("z"), Partition: &p2}}, nil); err != nil {
		t.Fatalf("produce to spread/2: %v", err)
	}
	if err := <-polled; err != nil {
		t.Fatalf("a long-polled fetch through node %d: %v", via, err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("a long-polled fetch through node %d answered after %v: it waited out a leader with nothing", via, took)
	}
}

// plainTopics is a TopicService client of node id generated from the protos, with none of
// the Go client's own handling (no retries, no splitting by leader).
func (c *cluster) plainTopics(id int) sluicev1connect.TopicServiceClient {
	return sluicev1connect.NewTopicServiceClient(http.DefaultClient, "http://"+c.procs[id-1].Addr("http"))
}

// withToken is msg as a request bearing the test user's token.
func withToken[T any](msg *T) *connect.Request[T] {
	r := connect.NewRequest(msg)
	r.Header().Set("Authorization", "Bearer "+nativeToken)
	return r
}
