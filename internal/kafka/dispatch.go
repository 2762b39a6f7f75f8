package kafka

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// reply is what a handler answers: a kmsg response, a Fetch response that
// the connection writes itself (to sendfile the batches), or nothing at all
// (Produce with acks=0).
type reply struct {
	msg   kmsg.Response
	fetch *fetchReply
	none  bool
	// closeAfter, when set, closes the connection once msg is written:
	// a failed SASL exchange is answered, then ended.
	closeAfter error
}

// handlerFunc handles one decoded request. An error closes the connection;
// errors a client should see travel as codes inside the reply.
type handlerFunc func(ctx context.Context, c *conn, req kmsg.Request) (reply, error)

type api struct {
	min, max int16
	fn       handlerFunc
}

// typed adapts a handler of one request type to handlerFunc.
func typed[R kmsg.Request](fn func(context.Context, *conn, R) (reply, error)) handlerFunc {
	return func(ctx context.Context, c *conn, req kmsg.Request) (reply, error) {
		return fn(ctx, c, req.(R))
	}
}

func msg(r kmsg.Response) (reply, error) { return reply{msg: r}, nil }

// apis is every API key served, with the versions served: the one table
// that both the dispatcher and ApiVersions read, and that docs/kafka.md
// lists (TestDocListsServedVersions checks). The maximums are the highest
// that kmsg encodes, with no version left out: the last ones added were
// DescribeLogDirs 5 (KIP-1066, Kafka 4.3), ApiVersions 5 (KIP-1242) and
// TxnOffsetCommit 6 (KIP-1319, both Kafka 4.4). The minimums are
// what the oldest clients still in use send (librdkafka 2.0 and
// kafka-python 2.0 send non-flexible versions), below Kafka 4's (KIP-896).
var apis map[int16]api

func init() {
	apis = map[int16]api{
		0:  {3, 13, typed(handleProduce)},
		1:  {4, 18, typed(handleFetch)},
		2:  {0, 11, typed(handleListOffsets)},
		3:  {0, 13, typed(handleMetadata)},
		10: {0, 6, typed(handleFindCoordinator)},
		17: {0, 1, typed(handleSASLHandshake)},
		18: {0, 5, typed(handleApiVersions)},
		19: {0, 7, typed(handleCreateTopics)},
		20: {0, 6, typed(handleDeleteTopics)},
		21: {0, 2, typed(handleDeleteRecords)},
		22: {0, 5, typed(handleInitProducerID)},
		23: {2, 4, typed(handleOffsetForLeaderEpoch)},
		29: {0, 3, typed(handleDescribeACLs)},
		30: {0, 3, typed(handleCreateACLs)},
		31: {0, 3, typed(handleDeleteACLs)},
		32: {0, 4, typed(handleDescribeConfigs)},
		33: {0, 2, typed(handleAlterConfigs)},
		35: {0, 5, typed(handleDescribeLogDirs)},
		43: {0, 2, typed(handleElectLeaders)},
		44: {0, 1, typed(handleIncrementalAlterConfigs)},
		45: {0, 1, typed(handleAlterPartitionReassignments)},
		46: {0, 0, typed(handleListPartitionReassignments)},
		61: {0, 0, typed(handleDescribeProducers)},
		// Transactions (KIP-98, KIP-664, KIP-890). KIP-890 part 2
		// (transaction.version 2 in ApiVersions' features): EndTxn 5
		// bumps the epoch per transaction, Produce 12+ and TxnOffsetCommit
		// 5 add their partition and group themselves; AddOffsetsToTxn 4
		// knows TRANSACTION_ABORTABLE; TxnOffsetCommit 6 names topics by
		// id (KIP-1319). WriteTxnMarkers (27) is the coordinator's own
		// step inside EndTxn, with no broker to send it to.
		24: {0, 5, typed(handleAddPartitionsToTxn)},
		25: {0, 4, typed(handleAddOffsetsToTxn)},
		26: {0, 5, typed(handleEndTxn)},
		28: {0, 6, typed(handleTxnOffsetCommit)},
		65: {0, 0, typed(handleDescribeTransactions)},
		66: {0, 2, typed(handleListTransactions)},
		37: {0, 3, typed(handleCreatePartitions)},
		36: {0, 2, typed(handleSASLAuthenticate)},
		60: {0, 2, typed(handleDescribeCluster)},
		// Classic consumer groups.
		8:  {0, 10, typed(handleOffsetCommit)},
		9:  {0, 10, typed(handleOffsetFetchStable)},
		11: {0, 9, typed(handleJoinGroup)},
		12: {0, 4, typed(handleHeartbeat)},
		13: {0, 5, typed(handleLeaveGroup)},
		14: {0, 5, typed(handleSyncGroup)},
		15: {0, 6, typed(handleDescribeGroups)},
		16: {0, 5, typed(handleListGroups)},
		42: {0, 3, typed(handleDeleteGroups)},
		47: {0, 0, typed(handleOffsetDelete)},
		// KIP-848 consumer groups, beside the classic ones.
		68: {0, 1, typed(handleConsumerGroupHeartbeat)},
		69: {0, 1, typed(handleConsumerGroupDescribe)},
		// KIP-932 share groups, over subscriptions (broker/share_groups.go).
		76: {1, 1, typed(handleShareGroupHeartbeat)},
		77: {1, 1, typed(handleShareGroupDescribe)},
		78: {1, 2, typed(handleShareFetch)},
		79: {1, 2, typed(handleShareAcknowledge)},
		90: {0, 1, typed(handleDescribeShareGroupOffsets)},
		91: {0, 0, typed(handleAlterShareGroupOffsets)},
		92: {0, 0, typed(handleDeleteShareGroupOffsets)},
	}
}

// sortedKeys lists the served API keys in order, for ApiVersions.
func sortedKeys() []int16 {
	keys := make([]int16, 0, len(apis))
	for k := range apis {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}
