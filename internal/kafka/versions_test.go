package kafka

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/batch"
)

// topicID is the Kafka topic id the node answers for name.
func (n *node) topicID(name string) [16]byte {
	n.t.Helper()
	info, err := n.b.DescribeTopic(name)
	if err != nil {
		n.t.Fatal(err)
	}
	return topicID(info.Settings)
}

// TestDocListsServedVersions: docs/kafka.md's table is dispatch.go's.
func TestDocListsServedVersions(t *testing.T) {
	doc, err := os.ReadFile("../../docs/kafka.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^\| (\d+) \| (\w+) \| (\d+)–(\d+) \|`)
	seen := map[int16]bool{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		key, _ := strconv.Atoi(m[1])
		lo, _ := strconv.Atoi(m[3])
		hi, _ := strconv.Atoi(m[4])
		a, ok := apis[int16(key)]
		if !ok {
			t.Errorf("docs/kafka.md lists %s (%d), which dispatch.go does not serve", m[2], key)
			continue
		}
		if int16(lo) != a.min || int16(hi) != a.max {
			t.Errorf("docs/kafka.md: %s (%d) %d–%d, dispatch.go serves %d–%d", m[2], key, lo, hi, a.min, a.max)
		}
		if name := kmsg.NameForKey(int16(key)); name != m[2] && !(key == 22 && m[2] == "InitProducerId") &&
			!(key >= 29 && key <= 31 && m[2] == name[:len(name)-4]+"Acls") && !(key == 18 && m[2] == "ApiVersions") &&
			!(key == 17 && m[2] == "SaslHandshake") && !(key == 36 && m[2] == "SaslAuthenticate") &&
			!(key == 45 && m[2] == "AlterPartitionReassignments") {
			t.Errorf("docs/kafka.md: key %d named %s, Kafka calls it %s", key, m[2], name)
		}
		seen[int16(key)] = true
	}
	for k := range apis {
		if !seen[k] {
			t.Errorf("dispatch.go serves %s (%d), docs/kafka.md does not list it", kmsg.NameForKey(k), k)
		}
	}
}

// TestFindCoordinatorBatched: v4+ (KIP-699) answer every key apart,
// refusals included; v3 still answers one key at the top level.
func TestFindCoordinatorBatched(t *testing.T) {
	if apis[10].max < 6 {
		t.Fatalf("FindCoordinator up to v%d; Kafka 3.5+ clients send v4-6 only", apis[10].max)
	}
	n := startNode(t, "")
	r := n.raw()
	for v := int16(4); v <= apis[10].max; v++ {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorKeys = v, []string{"g1", "g2"}
		resp := r.do(req).(*kmsg.FindCoordinatorResponse)
		if len(resp.Coordinators) != 2 {
			t.Fatalf("v%d: %+v", v, resp)
		}
		for i, co := range resp.Coordinators {
			if co.Key != req.CoordinatorKeys[i] || co.ErrorCode != 0 || co.NodeID != 0 || co.Host != "127.0.0.1" || co.Port <= 0 {
				t.Fatalf("v%d: coordinator %d: %+v", v, i, co)
			}
		}
		req.CoordinatorType, req.CoordinatorKeys = coordinatorTypeTxn, []string{"tx"}
		resp = r.do(req).(*kmsg.FindCoordinatorResponse)
		if co := resp.Coordinators[0]; co.ErrorCode != 0 || co.NodeID != 0 || co.Host != "127.0.0.1" {
			t.Fatalf("v%d txn: %+v", v, co)
		}
	}
}

// TestOffsetFetchGroups: v8+ (KIP-709) fetch several groups in one
// request, each with its own topics or all of them; negative commits read
// back as stored.
func TestOffsetFetchGroups(t *testing.T) {
	if apis[9].max < 9 {
		t.Fatalf("OffsetFetch up to v%d; Kafka 3.5+ clients send v8-9 only", apis[9].max)
	}
	n := startNode(t, "")
	n.createTopic("of", 2)
	r := n.raw()
	id := n.topicID("of") // v10 names topics by id only; older versions by name
	commit := func(group string, p int32, off int64) {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation = apis[8].max, group, -1
		req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "of", TopicID: id, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: p, Offset: off, LeaderEpoch: -1}}}}
		resp := r.do(req).(*kmsg.OffsetCommitResponse)
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("commit %s %d@%d: %v", group, p, off, kerr.ErrorForCode(code))
		}
	}
	commit("a", 0, 7)
	commit("a", 1, -2) // earliest, as resetOffsets commits it
	commit("b", 0, -1) // latest
	for v := int16(8); v <= apis[9].max; v++ {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = v
		req.Groups = []kmsg.OffsetFetchRequestGroup{
			{Group: "a"}, // all topics
			{Group: "b", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "of", TopicID: id, Partitions: []int32{0, 1}}}},
			{Group: ""},
		}
		resp := r.do(req).(*kmsg.OffsetFetchResponse)
		if len(resp.Groups) != 3 {
			t.Fatalf("v%d: %+v", v, resp)
		}
		a, b, bad := resp.Groups[0], resp.Groups[1], resp.Groups[2]
		if a.Group != "a" || a.ErrorCode != 0 || len(a.Topics) != 1 || len(a.Topics[0].Partitions) != 2 ||
			a.Topics[0].Partitions[0].Offset != 7 || a.Topics[0].Partitions[1].Offset != -2 {
			t.Fatalf("v%d group a: %+v", v, a)
		}
		if b.ErrorCode != 0 || b.Topics[0].Partitions[0].Offset != -1 || b.Topics[0].Partitions[1].Offset != -1 {
			t.Fatalf("v%d group b: %+v", v, b)
		}
		if bad.ErrorCode != kerr.InvalidGroupID.Code {
			t.Fatalf("v%d empty group id: %+v", v, bad)
		}
	}
	// A lower commit than -2 is refused and stores nothing.
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = apis[8].max, "a", -1
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "of", TopicID: id, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: -3}}}}
	if code := r.do(req).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidCommitOffsetSize.Code {
		t.Fatalf("commit -3: %v", kerr.ErrorForCode(code))
	}
	if got, _ := n.b.FetchOffset("a", "of", 0); got.Offset != 7 {
		t.Fatalf("after a refused commit: %d, want 7", got.Offset)
	}
}

// TestOffsetsByTopicID: OffsetCommit and OffsetFetch v10 name topics by id
// only. A commit by id is read back by id and by name (v9), with the id in
// every v10 answer, "all topics" included; an id that names no topic (one
// never made, or a topic deleted and made again) answers UNKNOWN_TOPIC_ID
// for its partitions and stores nothing, while the other topics of the
// same request commit.
func TestOffsetsByTopicID(t *testing.T) {
	if apis[8].max < 10 || apis[9].max < 10 {
		t.Fatalf("OffsetCommit up to v%d, OffsetFetch up to v%d; want 10", apis[8].max, apis[9].max)
	}
	n := startNode(t, "")
	n.createTopic("byid", 2)
	n.createTopic("gone", 1)
	gone := n.topicID("gone")
	if err := n.b.DeleteTopic("gone"); err != nil {
		t.Fatal(err)
	}
	n.createTopic("gone", 1) // the same name, a new id
	id, never := n.topicID("byid"), [16]byte{1, 2, 3}
	r := n.raw()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 10, "g", -1
	part := func(p int32, off int64) kmsg.OffsetCommitRequestTopicPartition {
		return kmsg.OffsetCommitRequestTopicPartition{Partition: p, Offset: off, LeaderEpoch: -1}
	}
	req.Topics = []kmsg.OffsetCommitRequestTopic{
		{TopicID: never, Partitions: []kmsg.OffsetCommitRequestTopicPartition{part(0, 5)}},
		{TopicID: id, Partitions: []kmsg.OffsetCommitRequestTopicPartition{part(0, 11), part(1, 12)}},
		{TopicID: gone, Partitions: []kmsg.OffsetCommitRequestTopicPartition{part(0, 9)}},
	}
	resp := r.do(req).(*kmsg.OffsetCommitResponse)
	want := []int16{kerr.UnknownTopicID.Code, 0, kerr.UnknownTopicID.Code}
	for i, rt := range resp.Topics {
		if rt.TopicID != req.Topics[i].TopicID {
			t.Errorf("commit: topic %d answered with id %x, want %x", i, rt.TopicID, req.Topics[i].TopicID)
		}
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != want[i] {
				t.Errorf("commit: topic %d partition %d: %v, want %v", i, rp.Partition, kerr.ErrorForCode(rp.ErrorCode), kerr.ErrorForCode(want[i]))
			}
		}
	}
	if got, ok := n.b.FetchOffset("g", "gone", 0); ok {
		t.Errorf("a commit to the old id of gone stored %+v in the new topic", got)
	}
	// By id (v10), a named topic and all topics; by name (v9).
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 10
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{
		{Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{TopicID: id, Partitions: []int32{0, 1}}, {TopicID: never, Partitions: []int32{0}}}},
		{Group: "g"},
	}
	fr := r.do(fetch).(*kmsg.OffsetFetchResponse)
	if len(fr.Groups) != 2 {
		t.Fatalf("fetch v10: %+v", fr)
	}
	named, all := fr.Groups[0], fr.Groups[1]
	if len(named.Topics) != 2 || named.Topics[0].TopicID != id || named.Topics[0].Partitions[0].Offset != 11 ||
		named.Topics[0].Partitions[1].Offset != 12 {
		t.Fatalf("fetch v10 by id: %+v", named)
	}
	if u := named.Topics[1]; u.TopicID != never || u.Partitions[0].ErrorCode != kerr.UnknownTopicID.Code || u.Partitions[0].Offset != -1 {
		t.Fatalf("fetch v10 of an unknown id: %+v", u)
	}
	if len(all.Topics) != 1 || all.Topics[0].TopicID != id || len(all.Topics[0].Partitions) != 2 {
		t.Fatalf("fetch v10 of all topics: %+v", all)
	}
	fetch.Version = 9
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "byid", Partitions: []int32{1}}}}}
	if got := r.do(fetch).(*kmsg.OffsetFetchResponse).Groups[0].Topics[0].Partitions[0]; got.Offset != 12 || got.ErrorCode != 0 {
		t.Fatalf("fetch v9 by name: %+v", got)
	}
}

// TestTopicIDs: CreateTopics v7 answers the id that Metadata, Fetch and
// DeleteTopics v6 use; an id no topic has is UNKNOWN_TOPIC_ID.
func TestTopicIDs(t *testing.T) {
	n := startNode(t, "")
	r := n.raw()
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Version = apis[19].max
	ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "ids", NumPartitions: 1, ReplicationFactor: 1}}
	created := r.do(ct).(*kmsg.CreateTopicsResponse).Topics[0]
	if created.ErrorCode != 0 || created.TopicID == ([16]byte{}) || created.TopicID != n.topicID("ids") {
		t.Fatalf("create v%d: %+v", ct.Version, created)
	}
	unknown := created.TopicID
	unknown[15] ^= 0xff
	for _, tc := range []struct {
		id   [16]byte
		want int16
	}{{created.TopicID, 0}, {unknown, kerr.UnknownTopicID.Code}} {
		pr := produceReq(apis[0].max, -1, "", 0, buildBatch(t, 2, nil))
		pr.Topics[0].TopicID = tc.id
		rt := r.do(pr).(*kmsg.ProduceResponse).Topics[0]
		if rt.TopicID != tc.id || rt.Partitions[0].ErrorCode != tc.want {
			t.Fatalf("produce v%d by id %x: %+v, want code %d", pr.Version, tc.id, rt, tc.want)
		}
	}
	if info, _ := n.b.DescribeTopic("ids"); info.Partitions[0].HighWatermark != 2 {
		t.Fatalf("produced by id: high watermark %d, want 2", info.Partitions[0].HighWatermark)
	}
	fetch := fetchReq(apis[1].max, "", 0, 0, 0)
	fetch.Topics[0].TopicID = unknown
	if p := r.do(fetch).(*kmsg.FetchResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("fetch by an unknown id: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.Version = apis[20].max
	dt.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: unknown}, {TopicID: created.TopicID}}
	resp := r.do(dt).(*kmsg.DeleteTopicsResponse)
	if resp.Topics[0].ErrorCode != kerr.UnknownTopicID.Code || resp.Topics[0].TopicID != unknown {
		t.Fatalf("delete an unknown id: %+v", resp.Topics[0])
	}
	if got := resp.Topics[1]; got.ErrorCode != 0 || got.Topic == nil || *got.Topic != "ids" || got.TopicID != created.TopicID {
		t.Fatalf("delete by id: %+v", got)
	}
	if _, err := n.b.DescribeTopic("ids"); err == nil {
		t.Fatal("topic still exists after delete by id")
	}
	// Created again under the same name: a new id, and the old one (which
	// the lookups above cached) names nothing.
	again := r.do(ct).(*kmsg.CreateTopicsResponse).Topics[0]
	if again.ErrorCode != 0 || again.TopicID == created.TopicID {
		t.Fatalf("recreated: %+v, old id %x", again, created.TopicID)
	}
	fetch.Topics[0].TopicID = created.TopicID
	if p := r.do(fetch).(*kmsg.FetchResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("fetch by the deleted topic's id: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	fetch.Topics[0].TopicID = again.TopicID
	if p := r.do(fetch).(*kmsg.FetchResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 {
		t.Fatalf("fetch by the new id: %v", kerr.ErrorForCode(p.ErrorCode))
	}
}

// TestListOffsetsSpecial: -3 is the record with the largest timestamp
// (not the last one); -4 is the log start; the tiered ones are -1.
func TestListOffsetsSpecial(t *testing.T) {
	n := startNode(t, "")
	n.createTopic("lo", 1)
	r := n.raw()
	list := func(ts int64) kmsg.ListOffsetsResponseTopicPartition {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version, req.ReplicaID = apis[2].max, -1
		req.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "lo", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, Timestamp: ts, CurrentLeaderEpoch: -1}}}}
		return r.do(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	}
	if p := list(-3); p.ErrorCode != 0 || p.Offset != -1 || p.Timestamp != -1 {
		t.Fatalf("max timestamp of an empty log: %+v", p)
	}
	// Three batches; the middle one's second record has the latest time.
	for _, ts := range [][]int64{{1000, 1001}, {3000, 5000, 4000}, {2000}} {
		r.do(produceReq(9, -1, "lo", 0, buildBatchAt(t, ts)))
	}
	if p := list(-3); p.ErrorCode != 0 || p.Offset != 3 || p.Timestamp != 5000 {
		t.Fatalf("max timestamp: offset %d at %d (%v), want 3 at 5000", p.Offset, p.Timestamp, kerr.ErrorForCode(p.ErrorCode))
	}
	if p := list(-4); p.ErrorCode != 0 || p.Offset != 0 {
		t.Fatalf("earliest local: %+v", p)
	}
	for _, ts := range []int64{-5, -6} {
		if p := list(ts); p.ErrorCode != 0 || p.Offset != -1 {
			t.Fatalf("tiered %d: %+v", ts, p)
		}
	}
	if p := list(-7); p.ErrorCode == 0 {
		t.Fatalf("timestamp -7: %+v", p)
	}
}

// TestGroupsNewVersions: ListGroups v5 filters by type (every group is
// classic); DescribeGroups v6 answers GROUP_ID_NOT_FOUND.
func TestGroupsNewVersions(t *testing.T) {
	n := startNode(t, "")
	n.createTopic("gv", 1)
	r := n.raw()
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Version, oc.Group, oc.Generation = apis[8].max, "g", -1
	oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "gv", TopicID: n.topicID("gv"), Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Offset: 1}}}}
	r.do(oc)
	for _, tc := range []struct {
		types []string
		want  int
	}{{nil, 1}, {[]string{"classic"}, 1}, {[]string{"Classic", "share"}, 1}, {[]string{"consumer"}, 0}} {
		lg := kmsg.NewPtrListGroupsRequest()
		lg.Version, lg.TypesFilter = apis[16].max, tc.types
		resp := r.do(lg).(*kmsg.ListGroupsResponse)
		if len(resp.Groups) != tc.want || (tc.want == 1 && resp.Groups[0].GroupType != "classic") {
			t.Fatalf("types %v: %+v", tc.types, resp.Groups)
		}
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version, dg.Groups = apis[15].max, []string{"g", "nope"}
	resp := r.do(dg).(*kmsg.DescribeGroupsResponse)
	if resp.Groups[0].ErrorCode != 0 || resp.Groups[1].ErrorCode != kerr.GroupIDNotFound.Code || resp.Groups[1].ErrorMessage == nil {
		t.Fatalf("describe v%d: %+v", dg.Version, resp.Groups)
	}
	dg.Version = 5
	if resp := r.do(dg).(*kmsg.DescribeGroupsResponse); resp.Groups[1].ErrorCode != 0 || resp.Groups[1].State != "Dead" {
		t.Fatalf("describe v5 of an unknown group: %+v", resp.Groups[1])
	}
}

// buildBatchAt builds one uncompressed batch of records at the given times.
func buildBatchAt(t *testing.T, times []int64) []byte {
	t.Helper()
	recs := make([]batch.Record, len(times))
	for i, ts := range times {
		recs[i] = batch.Record{Timestamp: ts, Value: []byte{byte(i)}}
	}
	b, err := batch.Build(recs, batch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
