package kafka

import (
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
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

// TestDescribeLogDirsV5: every version answers the one log dir with each
// partition's size; v5 adds IsCordoned, always false (sluice cordons
// nothing). Without describe on the cluster, v3+ answer
// CLUSTER_AUTHORIZATION_FAILED and no dir, older versions no dir.
func TestDescribeLogDirsV5(t *testing.T) {
	if apis[35].max < 5 {
		t.Fatalf("DescribeLogDirs up to v%d, want 5", apis[35].max)
	}
	n := startAuthNode(t, testUsers, Config{}, "orders")
	admin := n.asUser("admin")
	admin.do(produceReq(9, -1, "orders", 1, buildBatch(t, 3, nil)))
	info, err := n.b.DescribeTopic("orders")
	if err != nil || info.Partitions[1].SizeBytes <= 0 {
		t.Fatalf("orders: %+v %v", info, err)
	}
	alice := n.asUser("alice")
	for _, tc := range []struct {
		name   string
		r      *rawConn
		topics []kmsg.DescribeLogDirsRequestTopic
		want   *kerr.Error // v3+; older versions answer no dir instead
		parts  int         // partitions of orders answered
	}{
		{"all topics", admin, nil, nil, 2},
		{"one partition", admin, []kmsg.DescribeLogDirsRequestTopic{{Topic: "orders", Partitions: []int32{1}}}, nil, 1},
		{"an unknown topic", admin, []kmsg.DescribeLogDirsRequestTopic{{Topic: "nope", Partitions: []int32{0}}}, nil, -1},
		{"without describe on the cluster", alice, nil, kerr.ClusterAuthorizationFailed, -1},
	} {
		for v := apis[35].min; v <= apis[35].max; v++ {
			req := kmsg.NewPtrDescribeLogDirsRequest()
			req.Version, req.Topics = v, tc.topics
			resp := tc.r.do(req).(*kmsg.DescribeLogDirsResponse)
			what := fmt.Sprintf("%s v%d", tc.name, v)
			if tc.want != nil {
				if len(resp.Dirs) != 0 || (v >= 3 && resp.ErrorCode != tc.want.Code) {
					t.Errorf("%s: %+v, want %v and no dir", what, resp, tc.want)
				}
				continue
			}
			if resp.ErrorCode != 0 || len(resp.Dirs) != 1 {
				t.Fatalf("%s: %+v", what, resp)
			}
			d := resp.Dirs[0]
			if d.Dir != n.b.TopicsDir() || d.ErrorCode != 0 || d.IsCordoned || (v >= 4 && (d.TotalBytes != -1 || d.UsableBytes != -1)) {
				t.Errorf("%s: dir %+v", what, d)
			}
			got := -1
			for _, dt := range d.Topics {
				if dt.Topic != "orders" {
					continue
				}
				got = len(dt.Partitions)
				for _, p := range dt.Partitions {
					if p.Size != info.Partitions[p.Partition].SizeBytes {
						t.Errorf("%s: orders/%d size %d, broker says %d", what, p.Partition, p.Size, info.Partitions[p.Partition].SizeBytes)
					}
				}
			}
			if got != tc.parts {
				t.Errorf("%s: %d partitions of orders answered, want %d", what, got, tc.parts)
			}
		}
	}
}

// TestNewVersionsFranz: franz-go v1.22.3 picks the three newest versions
// on its own. Every connection to a broker it found in Metadata sends
// ApiVersions v5 naming cluster "sluice" and node 0 (the bootstrap one
// names neither), kadm's DescribeAllLogDirs sends v5, and a
// GroupTransactSession commits its offsets with TxnOffsetCommit v6, by
// topic id; the committed offsets are the ones the session consumed to.
func TestNewVersionsFranz(t *testing.T) {
	n := startNode(t, "")
	var mu sync.Mutex
	seen := map[string]bool{}
	n.s.mu.Lock()
	n.s.testHookHandling = func(req kmsg.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch r := req.(type) {
		case *kmsg.ApiVersionsRequest:
			switch {
			case r.Version == 5 && r.ClusterID == nil && r.NodeID == -1:
				seen["ApiVersions v5 bootstrap"] = true
			case r.Version == 5 && r.ClusterID != nil && *r.ClusterID == "sluice" && r.NodeID == 0:
				seen["ApiVersions v5 named"] = true
			}
		case *kmsg.DescribeLogDirsRequest:
			seen[fmt.Sprintf("DescribeLogDirs v%d", r.Version)] = true
		case *kmsg.TxnOffsetCommitRequest:
			if len(r.Topics) > 0 && r.Topics[0].TopicID == n.topicIDQuiet("nvin") {
				seen[fmt.Sprintf("TxnOffsetCommit v%d by id", r.Version)] = true
			}
		}
	}
	n.s.mu.Unlock()
	n.createTopic("nvin", 2)
	n.createTopic("nvout", 1)
	ctx := testCtx(t, 60*time.Second)
	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, &kgo.Record{Topic: "nvin", Partition: int32(i % 2), Value: []byte{byte(i)}})
	}
	if err := n.client(kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(n.client()).DescribeAllLogDirs(ctx, nil); err != nil {
		t.Fatal(err)
	}
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(n.addr), kgo.TransactionalID("nv"),
		kgo.ConsumerGroup("nv"), kgo.ConsumeTopics("nvin"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	for got := 0; got < len(recs); {
		fs := sess.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("poll: %v", err)
		}
		if fs.NumRecords() == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Topic: "nvout", Value: r.Value}, nil)
		})
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil || !committed {
			t.Fatalf("end: committed %v, %v", committed, err)
		}
		got += fs.NumRecords()
	}
	for p := int32(0); p < 2; p++ {
		if o, ok := n.b.FetchOffset("nv", "nvin", p); !ok || o.Offset != 10 {
			t.Errorf("nv's offset of nvin/%d: %+v (found %v), want 10", p, o, ok)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"ApiVersions v5 bootstrap", "ApiVersions v5 named", "DescribeLogDirs v5", "TxnOffsetCommit v6 by id"} {
		if !seen[want] {
			t.Errorf("franz-go sent no %s (saw %v)", want, seen)
		}
	}
}

// topicIDQuiet is topicID, zero for a topic not (yet) there; safe from
// the server's goroutines.
func (n *node) topicIDQuiet(name string) [16]byte {
	info, err := n.b.DescribeTopic(name)
	if err != nil {
		return [16]byte{}
	}
	return topicID(info.Settings)
}
