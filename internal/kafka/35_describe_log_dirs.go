package kafka

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
)

// handleDescribeLogDirs answers the one log dir a sluice node has (the
// data directory's topics/) with every partition's real size on disk, the
// bytes of its segments. There are no future replicas (offset lag 0) and
// no volume statistics yet: total and usable bytes are -1, Kafka's
// "unknown". Null topics mean all. It needs describe on the cluster, as
// in Kafka (v3+ answer CLUSTER_AUTHORIZATION_FAILED, older versions an
// empty list). v5's IsCordoned (KIP-1066) is always false: sluice has no
// cordoning, its one log dir always takes new partitions.
func handleDescribeLogDirs(_ context.Context, c *conn, req *kmsg.DescribeLogDirsRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if !c.may(auth.Describe, auth.Cluster, "") {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return msg(resp)
	}
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir, dir.TotalBytes, dir.UsableBytes = c.s.b.TopicsDir(), -1, -1
	dir.IsCordoned = false // v5+: no cordoning
	want := map[string][]int32{}
	for _, t := range req.Topics {
		want[t.Topic] = append(want[t.Topic], t.Partitions...)
	}
	for _, ts := range c.s.b.ListTopics("") {
		parts, asked := want[ts.Name]
		if req.Topics != nil && !asked {
			continue
		}
		info, err := c.s.b.DescribeTopic(ts.Name)
		if err != nil {
			continue // deleted meanwhile
		}
		rt := kmsg.NewDescribeLogDirsResponseDirTopic()
		rt.Topic = ts.Name
		for _, p := range info.Partitions {
			if req.Topics != nil && !slices.Contains(parts, p.Partition) {
				continue
			}
			rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			rp.Partition, rp.Size = p.Partition, p.SizeBytes
			rt.Partitions = append(rt.Partitions, rp)
		}
		dir.Topics = append(dir.Topics, rt)
	}
	resp.Dirs = []kmsg.DescribeLogDirsResponseDir{dir}
	return msg(resp)
}
