package e2e

import (
	"context"
	"testing"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-mq/sluice/client"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// checkReadsAcrossLeaders: the topic "spread" has three partitions led by three nodes
// and one record in partition 0 (checkPartlyWritten). After one record more in each of the
// others (single-partition produces, forwarded), the Go client's ListOffsets of every
// partition and Fetch of all three, through every node, answer for all of them: the node
// refuses NOT_LEADER what it does not lead, and the client asks again one partition at a
// time (client/topic_split.go). Before, `sluice topic consume` and `topic offsets` failed on
// any multi-partition topic of a cluster whose leaders were spread.
func checkReadsAcrossLeaders(ctx context.Context, t *testing.T, c *cluster, via int) {
	t.Helper()
	for p := int32(1); p < 3; p++ {
		if _, err := c.native(via).Produce(ctx, "spread", []*client.ProduceRecord{{Value: []byte("y"), Partition: &p}}, nil); err != nil {
			t.Fatalf("produce to spread/%d through node %d: %v", p, via, err)
		}
	}
	for id := 1; id <= 3; id++ {
		offs, err := c.native(id).ListOffsets(ctx, &client.ListOffsetsRequest{Topic: "spread",
			Spec: &sluicev1.ListOffsetsRequest_Latest{Latest: true}})
		if err != nil || len(offs) != 3 {
			t.Fatalf("ListOffsets of every partition through node %d: %v, %v", id, offs, err)
		}
		for i, o := range offs {
			if o.GetPartition() != int32(i) || o.GetOffset() != 1 {
				t.Fatalf("ListOffsets through node %d: %v, want every partition at 1", id, offs)
			}
		}
		res, err := c.native(id).Fetch(ctx, &client.FetchRequest{Topic: "spread", MaxWait: durationpb.New(0),
			Partitions: []*client.PartitionOffset{{Partition: 0}, {Partition: 1}, {Partition: 2}}})
		if err != nil {
			t.Fatalf("fetch of three partitions through node %d: %v", id, err)
		}
		for i, pr := range res.GetPartitions() {
			if pr.GetError() != nil || pr.GetPartition() != int32(i) || len(pr.GetRecords()) != 1 || pr.GetNextOffset() != 1 {
				t.Fatalf("fetch through node %d: partition %d answered %v", id, i, pr)
			}
		}
	}
}
