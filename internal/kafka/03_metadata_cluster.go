package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// What Metadata says about the brokers and where partitions live. A single node is the
// only broker, the controller and every partition's leader at epoch 0. A node of a
// cluster lists the nodes the catalog knows (each with the Kafka address it registered),
// names the metadata group's leader as the controller, and describes each partition as
// its Raft group stands: leader, leader epoch (the Raft term), replicas and the voters as
// the in-sync set (docs/cluster.md, "What a Kafka client sees").

// A front-end serving a TLS listener names the other nodes by their TLS listeners (as
// each said when asked: broker/cluster_listeners.go), as Kafka names each broker by the
// listener the client came in on: a client that bootstrapped over TLS dialling a plaintext
// port fails its handshake. A node whose TLS listener is not known (it has none, or was
// not asked yet) is named by its plaintext one, as before.
func (c *conn) brokers() []kmsg.MetadataResponseBroker {
	self := c.s.cfg.NodeID
	adv := c.s.advertisedAddr()
	out := []kmsg.MetadataResponseBroker{{NodeID: self, Host: adv.host, Port: adv.port}}
	for _, n := range c.s.b.ClusterNodes() {
		addr := n.KafkaAddr
		if c.s.cfg.TLS && n.KafkaTLSAddr != "" {
			addr = n.KafkaTLSAddr
		}
		if n.ID == self || addr == "" {
			continue
		}
		host, port, err := SplitAdvertised(addr)
		if err != nil {
			continue
		}
		out = append(out, kmsg.MetadataResponseBroker{NodeID: n.ID, Host: host, Port: port})
	}
	return out
}

// controller is the node clients send CreateTopics and the like to; -1 while the
// cluster's metadata group elects a leader (clients retry).
func (c *conn) controller() int32 {
	if !c.s.b.Clustered() {
		return c.s.cfg.NodeID
	}
	if id := c.s.b.Controller(); id != 0 {
		return id
	}
	return -1
}

func (c *conn) partitionMetadata(topic string, partition int32) kmsg.MetadataResponseTopicPartition {
	mp := kmsg.NewMetadataResponseTopicPartition()
	mp.Partition = partition
	self := c.s.cfg.NodeID
	pl, err := c.s.b.PartitionPlacement(topic, partition)
	if err != nil {
		mp.ErrorCode = errCode(err, nil)
		return mp
	}
	if !c.s.b.Clustered() {
		mp.Leader, mp.LeaderEpoch = self, 0
		mp.Replicas, mp.ISR = []int32{self}, []int32{self}
		return mp
	}
	mp.Leader, mp.LeaderEpoch = pl.Leader, pl.Epoch
	if pl.Leader == 0 {
		mp.Leader = -1
		mp.ErrorCode = kerr.LeaderNotAvailable.Code
	}
	mp.Replicas, mp.ISR = pl.Replicas, pl.InSync
	return mp
}
