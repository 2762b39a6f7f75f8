package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// transactionVersion is the transaction.version feature announced: 2 is
// KIP-890 part 2 (an epoch bump per transaction, produce and
// TxnOffsetCommit adding their partition and group themselves), which
// clients (franz-go 1.20+, Java 4.0+) use only when the cluster finalizes
// it. Versions 0 and 1 are served too: a client that does not opt in
// sends the older request versions and gets their behaviour.
const transactionVersion = 2

// featuresEpoch is the epoch of the finalized features: they never
// change while sluice runs, and a client only compares epochs.
const featuresEpoch = 1

// handleApiVersions lists the apis table. Clients pick, per API, the
// highest version both sides support. v3+ also carry the features
// (KIP-584): transaction.version.
//
// v5 (KIP-1242) names the cluster and node the client believes it reached,
// both or neither (null and -1: a bootstrap connection, answered as v4).
// One without the other is INVALID_REQUEST; both, and either is not this
// node's (the cluster id Metadata answers, the node id it lists itself
// under), REBOOTSTRAP_REQUIRED: DNS or a load balancer sent the client to
// the wrong broker, and it should rediscover the cluster from its seeds.
// Both refusals carry no keys, as Kafka's do.
func handleApiVersions(_ context.Context, c *conn, req *kmsg.ApiVersionsRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.FinalizedFeaturesEpoch = -1
	if req.Version >= 5 {
		switch named := req.NodeID != -1; {
		case (req.ClusterID != nil) != named:
			resp.ErrorCode = kerr.InvalidRequest.Code
			return msg(resp)
		case named && (*req.ClusterID != c.s.cfg.ClusterID || req.NodeID != c.s.cfg.NodeID):
			resp.ErrorCode = kerr.RebootstrapRequired.Code
			return msg(resp)
		}
	}
	resp.ApiKeys = apiVersionList()
	txnVersion := int16(transactionVersion)
	if c.s.b.Clustered() {
		resp.ApiKeys, txnVersion = clusterVersions(resp.ApiKeys), clusterTransactionVersion
	}
	if req.Version >= 3 {
		resp.SupportedFeatures = []kmsg.ApiVersionsResponseSupportedFeature{
			{Name: "transaction.version", MinVersion: 0, MaxVersion: txnVersion}}
		resp.FinalizedFeaturesEpoch = featuresEpoch
		resp.FinalizedFeatures = []kmsg.ApiVersionsResponseFinalizedFeature{
			{Name: "transaction.version", MinVersionLevel: txnVersion, MaxVersionLevel: txnVersion}}
	}
	return msg(resp)
}

// clusterTransactionVersion is the transaction.version a cluster node announces: KIP-890
// part 1 (the partition leader verifies a transactional produce), not part 2, whose
// produce v12 adds its partition through the coordinator, which in a cluster is another
// node (docs/cluster.md, "Transactions").
const clusterTransactionVersion = 1

// clusterMaxVersions are the highest versions a cluster node serves of the requests part
// 2 changed: produce v11, EndTxn v4 and TxnOffsetCommit v4 (a client that sends more
// anyway is answered UNSUPPORTED_VERSION by the broker).
var clusterMaxVersions = map[int16]int16{0: 11, 26: 4, 28: 4}

func clusterVersions(keys []kmsg.ApiVersionsResponseApiKey) []kmsg.ApiVersionsResponseApiKey {
	for i, k := range keys {
		if m, ok := clusterMaxVersions[k.ApiKey]; ok && k.MaxVersion > m {
			keys[i].MaxVersion = m
		}
	}
	return keys
}

// apiVersionsUnsupported answers a too-new ApiVersions request in v0 form,
// which every client can read, listing what we serve so it retries lower.
func apiVersionsUnsupported() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = apiVersionList()
	return resp
}

func apiVersionList() []kmsg.ApiVersionsResponseApiKey {
	keys := sortedKeys()
	out := make([]kmsg.ApiVersionsResponseApiKey, 0, len(keys))
	for _, k := range keys {
		a := apis[k]
		out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: a.min, MaxVersion: a.max})
	}
	return out
}
