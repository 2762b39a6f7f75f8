package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/broker"
)

// shareLeaderHint is KIP-951's hint for a share-partition another node of the cluster leads
// (NOT_LEADER_OR_FOLLOWER): its leader, leader epoch (the Raft term) and the leader's
// endpoint, so the client moves its share fetches there without a Metadata round trip.
// ok is false when this node cannot tell (it hosts no replica of the partition, or knows
// no leader): the client refreshes its metadata instead.
func (c *conn) shareLeaderHint(err error, topic string, partition int32) (leader, epoch int32, ep kmsg.MetadataResponseBroker, ok bool) {
	var nl *broker.NotLeaderError
	if !errors.As(err, &nl) || nl.Catalog || nl.Leader == 0 {
		return 0, 0, ep, false
	}
	pl, perr := c.s.b.PartitionPlacement(topic, partition)
	if perr != nil || pl.Leader != nl.Leader || pl.Epoch <= 0 {
		return 0, 0, ep, false
	}
	for _, b := range c.brokers() {
		if b.NodeID == pl.Leader {
			return pl.Leader, pl.Epoch, b, true
		}
	}
	return 0, 0, ep, false
}
