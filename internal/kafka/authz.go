package kafka

import (
	"github.com/sluice-mq/sluice/internal/auth"
)

// Authorization (docs/security.md, ## Kafka): each handler asks may for
// the operation its API needs, in Kafka's terms mapped onto auth's:
//
//	Produce                                   produce topic
//	Fetch                                     consume topic
//	ListOffsets, OffsetForLeaderEpoch         describe topic
//	Metadata                                  describe topic (auto-create: create topic or cluster)
//	OffsetCommit                              consume group, consume topic
//	OffsetFetch                               describe group, describe topic
//	FindCoordinator, DescribeGroups           describe group
//	JoinGroup, SyncGroup, Heartbeat, LeaveGroup consume group
//	ListGroups                                describe cluster, else the groups it may describe
//	DeleteGroups                              delete group
//	OffsetDelete                              delete group, consume topic
//	CreateTopics                              create cluster or create topic
//	DeleteTopics                              delete topic
//	CreatePartitions                          alter topic
//	DescribeConfigs                           describe topic (broker: describe cluster)
//	AlterConfigs, IncrementalAlterConfigs     alter topic (broker: alter cluster)
//	DescribeProducers                         describe topic
//	DescribeLogDirs                           describe cluster
//	ElectLeaders, AlterPartitionReassignments alter cluster
//	ListPartitionReassignments                describe cluster
//	InitProducerId                            produce cluster, or produce on some topic (KIP-679)
//	DescribeCluster, DescribeAcls             describe cluster
//	CreateAcls, DeleteAcls                    alter cluster
//
// A refusal answers the API's own code (TOPIC_AUTHORIZATION_FAILED,
// GROUP_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED) and is
// counted and logged by the store; a topic or group merely left out of a
// listing is not a refusal.

// may reports whether the connection's principal may do op on kind:name,
// recording a refusal.
func (c *conn) may(op auth.Operation, kind auth.Kind, name string) bool {
	st := c.s.cfg.Auth
	if st == nil {
		return true
	}
	r := auth.Resource{Kind: kind, Name: name}
	if st.Allowed(c.sasl.principal, op, r) {
		return true
	}
	st.Fail(saslProtocol, auth.ReasonDenied, c.sasl.principal, c.peer(), string(op)+" "+r.String())
	return false
}

// sees reports whether the principal may describe kind:name, without
// recording anything: for filtering what a listing shows.
func (c *conn) sees(kind auth.Kind, name string) bool {
	return c.s.cfg.Auth.Allowed(c.sasl.principal, auth.Describe, auth.Resource{Kind: kind, Name: name})
}

// mayCluster is may on the cluster, silently (a fallback before a more
// specific check that records the refusal).
func (c *conn) mayCluster(op auth.Operation) bool {
	return c.s.cfg.Auth.Allowed(c.sasl.principal, op, auth.Resource{Kind: auth.Cluster})
}

// mayQuiet is may without recording a refusal: for a pre-check whose
// refusal the real check records.
func (c *conn) mayQuiet(op auth.Operation, kind auth.Kind, name string) bool {
	return c.s.cfg.Auth.Allowed(c.sasl.principal, op, auth.Resource{Kind: kind, Name: name})
}
