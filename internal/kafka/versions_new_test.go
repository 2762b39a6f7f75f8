package kafka

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/broker"
)

// TestApiVersionsV5: KIP-1242's cluster and node ids, both or neither.
// Neither is a bootstrap connection, answered as v4; one alone is
// INVALID_REQUEST; both must be this node's (its configured cluster id,
// which Metadata answers, and node id), else REBOOTSTRAP_REQUIRED. A
// refusal carries no keys and leaves the connection serving. A node
// configured with another cluster and node id checks against those.
func TestApiVersionsV5(t *testing.T) {
	if apis[18].max < 5 {
		t.Fatalf("ApiVersions up to v%d, want 5", apis[18].max)
	}
	for _, node := range []struct {
		cluster string
		id      int32
		cfg     Config
	}{{"sluice", 0, Config{}}, {"blue", 3, Config{ClusterID: "blue", NodeID: 3}}} {
		n := startNodeWith(t, "", broker.SyncPolicy{Mode: broker.SyncNever}, node.cfg)
		r := n.raw()
		// Metadata names the ids a client sends back.
		md := kmsg.NewPtrMetadataRequest()
		md.Version = apis[3].max
		mr := r.do(md).(*kmsg.MetadataResponse)
		if mr.ClusterID == nil || *mr.ClusterID != node.cluster || len(mr.Brokers) != 1 || mr.Brokers[0].NodeID != node.id {
			t.Fatalf("%s: metadata cluster %v brokers %+v", node.cluster, mr.ClusterID, mr.Brokers)
		}
		other := "other"
		for _, tc := range []struct {
			name    string
			cluster *string
			id      int32
			want    *kerr.Error
		}{
			{"neither (bootstrap)", nil, -1, nil},
			{"both, this node", &node.cluster, node.id, nil},
			{"the cluster alone", &node.cluster, -1, kerr.InvalidRequest},
			{"the node alone", nil, node.id, kerr.InvalidRequest},
			{"node 0 alone (a struct literal's zero)", nil, 0, kerr.InvalidRequest},
			{"another cluster", &other, node.id, kerr.RebootstrapRequired},
			{"the empty cluster id", strp(""), node.id, kerr.RebootstrapRequired},
			{"another node", &node.cluster, node.id + 1, kerr.RebootstrapRequired},
			{"both wrong", &other, node.id + 1, kerr.RebootstrapRequired},
		} {
			req := kmsg.NewPtrApiVersionsRequest()
			req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = 5, "raw", "1"
			req.ClusterID, req.NodeID = tc.cluster, tc.id
			resp := r.do(req).(*kmsg.ApiVersionsResponse)
			what := node.cluster + ": " + tc.name
			wantCode(t, what, resp.ErrorCode, tc.want)
			if tc.want != nil {
				if len(resp.ApiKeys) != 0 || len(resp.FinalizedFeatures) != 0 || resp.FinalizedFeaturesEpoch != -1 {
					t.Errorf("%s: a refusal with keys or features: %+v", what, resp)
				}
				continue
			}
			if len(resp.ApiKeys) != len(apis) || resp.FinalizedFeaturesEpoch != featuresEpoch || len(resp.FinalizedFeatures) != 1 {
				t.Errorf("%s: %d keys (want %d), features %+v at epoch %d", what, len(resp.ApiKeys), len(apis),
					resp.FinalizedFeatures, resp.FinalizedFeaturesEpoch)
			}
			for _, k := range resp.ApiKeys {
				if k.ApiKey == 18 && k.MaxVersion != 5 {
					t.Errorf("%s: ApiVersions advertised up to v%d", what, k.MaxVersion)
				}
			}
		}
		// A version past ours still gets the v0 answer listing the keys.
		r.corr++
		frame := []byte{0, 0, 0, 0, 0, 18, 0, byte(apis[18].max + 1), 0, 0, 0, byte(r.corr), 0xff, 0xff, 0}
		binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
		if _, err := r.c.Write(frame); err != nil {
			t.Fatal(err)
		}
		v0 := kmsg.NewPtrApiVersionsRequest()
		v0.SetVersion(0)
		if old := r.recv(v0, r.corr).(*kmsg.ApiVersionsResponse); old.ErrorCode != kerr.UnsupportedVersion.Code || len(old.ApiKeys) != len(apis) {
			t.Fatalf("%s: ApiVersions v%d: %+v", node.cluster, apis[18].max+1, old)
		}
	}
}
