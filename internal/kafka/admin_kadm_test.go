package kafka

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// topicConfig reads one config of a topic through kadm DescribeTopicConfigs.
func topicConfigValue(t *testing.T, adm *kadm.Client, topic, key string) string {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(testCtx(t, 10*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rc.Configs {
		if c.Key == key && c.Value != nil {
			return *c.Value
		}
	}
	t.Fatalf("%s has no config %s", topic, key)
	return ""
}

// TestKadmAlterConfigs: incremental and whole-state alters through kadm,
// visible to DescribeConfigs; a refused resource changes nothing.
func TestKadmAlterConfigs(t *testing.T) {
	n := startNode(t, "")
	n.createTopic("ac", 1)
	adm := n.admin()
	ctx := testCtx(t, 30*time.Second)
	alter := func(state bool, validate bool, cfgs ...kadm.AlterConfig) kadm.AlterConfigsResponse {
		t.Helper()
		var rs kadm.AlterConfigsResponses
		var err error
		switch {
		case state && validate:
			rs, err = adm.ValidateAlterTopicConfigsState(ctx, cfgs, "ac")
		case state:
			rs, err = adm.AlterTopicConfigsState(ctx, cfgs, "ac")
		case validate:
			rs, err = adm.ValidateAlterTopicConfigs(ctx, cfgs, "ac")
		default:
			rs, err = adm.AlterTopicConfigs(ctx, cfgs, "ac")
		}
		if err != nil || len(rs) != 1 {
			t.Fatalf("alter: %v %v", rs, err)
		}
		return rs[0]
	}
	set := func(k, v string) kadm.AlterConfig { return kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: &v} }

	if r := alter(false, false, set("retention.ms", "3600000"), set("max.message.bytes", "4096")); r.Err != nil {
		t.Fatalf("incremental set: %v %s", r.Err, r.ErrMessage)
	}
	if v := topicConfigValue(t, adm, "ac", "retention.ms"); v != "3600000" {
		t.Fatalf("retention.ms %s", v)
	}
	// Kafka's max.message.bytes is enforced at once.
	big := &kgo.Record{Topic: "ac", Value: make([]byte, 8000)}
	cl := n.client(kgo.ProducerBatchMaxBytes(16<<10), kgo.RecordRetries(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err := cl.ProduceSync(ctx, big).FirstErr(); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("8 KB record over a 4 KB max.message.bytes: %v", err)
	}
	for _, bad := range [][]kadm.AlterConfig{
		{set("retention.ms", "3"), set("cleanup.policy", "compaction")}, // no such policy
		{set("min.cleanable.dirty.ratio", "1.5")},
		{set("delete.retention.ms", "-1")},
		{set("max.compaction.lag.ms", "0")},
		{set("min.compaction.lag.ms", "10"), set("max.compaction.lag.ms", "5")},
		{set("retention.ms", "3"), set("no.such.config", "1")},
		{set("retention.ms", "banana")},
		{set("min.insync.replicas", "2")},
		{{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: strp("bogus")}},
		{{Op: kadm.SubtractConfig, Name: "cleanup.policy", Value: strp("delete")}}, // leaves none
		{set("cleanup.policy", "")},                                                // an empty list, set directly: refused as well
		{{Op: kadm.AppendConfig, Name: "retention.ms", Value: strp("1")}},
	} {
		if r := alter(false, false, bad...); !errors.Is(r.Err, kerr.InvalidConfig) {
			t.Fatalf("%+v: %v, want INVALID_CONFIG", bad, r.Err)
		}
	}
	if v := topicConfigValue(t, adm, "ac", "retention.ms"); v != "3600000" {
		t.Fatalf("a refused alter changed retention.ms to %s", v)
	}
	if r := alter(false, true, set("retention.ms", "7")); r.Err != nil || topicConfigValue(t, adm, "ac", "retention.ms") != "3600000" {
		t.Fatalf("validate only: %v, or it changed retention.ms", r.Err)
	}
	if r := alter(false, false, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "retention.ms"}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if v := topicConfigValue(t, adm, "ac", "retention.ms"); v != "604800000" {
		t.Fatalf("deleted retention.ms is %s, want the default", v)
	}
	// The whole-state AlterConfigs resets what it does not list.
	if r := alter(true, false, set("retention.bytes", "1048576")); r.Err != nil {
		t.Fatalf("alter state: %v %s", r.Err, r.ErrMessage)
	}
	if v := topicConfigValue(t, adm, "ac", "max.message.bytes"); v != "1048588" {
		t.Fatalf("max.message.bytes %s after a state alter that did not list it, want the default", v)
	}
	if v := topicConfigValue(t, adm, "ac", "retention.bytes"); v != "1048576" {
		t.Fatalf("retention.bytes %s", v)
	}
	if r := alter(true, false, set("cleanup.policy", "bogus")); !errors.Is(r.Err, kerr.InvalidConfig) {
		t.Fatalf("state alter to an unknown policy: %v", r.Err)
	}
	rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{set("log.retention.ms", "1")}, 0)
	if err != nil || len(rs) != 1 || !errors.Is(rs[0].Err, kerr.PolicyViolation) {
		t.Fatalf("broker config: %+v %v", rs, err)
	}
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{set("retention.ms", "1000")}, "missing"); err != nil {
		t.Fatal(err)
	}
}

// TestKadmOffsets: negative commits round-trip through kadm; OffsetDelete
// removes offsets, refuses a topic a live member consumes, and an unknown
// group; a consumer resumes from a reset to -2 at the log start.
func TestKadmOffsets(t *testing.T) {
	n := startNode(t, "")
	n.createTopic("neg", 2)
	adm := n.admin()
	ctx := testCtx(t, 30*time.Second)
	prod := n.client(kgo.DefaultProduceTopic("neg"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 10 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 2), Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "neg", Partition: 0, At: -2, LeaderEpoch: -1})
	os.Add(kadm.Offset{Topic: "neg", Partition: 1, At: 5, LeaderEpoch: -1})
	if rs, err := adm.CommitOffsets(ctx, "rg", os); err != nil || rs.Error() != nil {
		t.Fatalf("commit -2: %v %v", err, rs.Error())
	}
	fetched, err := adm.FetchOffsets(ctx, "rg")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := fetched.Lookup("neg", 0); o.At != -2 {
		t.Fatalf("fetched %+v, want -2 as committed", o)
	}
	// franz-go resolves -2 with its reset policy; "earliest" starts at 0.
	cons := n.client(kgo.ConsumerGroup("rg"), kgo.ConsumeTopics("neg"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	got := map[int32][]int64{}
	for total := 0; total < 5+0; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) { got[r.Partition] = append(got[r.Partition], r.Offset); total++ })
		if len(got[0]) >= 5 {
			break
		}
	}
	if len(got[0]) != 5 || got[0][0] != 0 {
		t.Fatalf("partition 0 after a reset to -2: offsets %v, want from 0", got[0])
	}
	if len(got[1]) > 0 && got[1][0] != 5 {
		t.Fatalf("partition 1 resumed at %d, want 5", got[1][0])
	}
	// A live member consumes "neg": its offsets cannot be deleted.
	del, err := adm.DeleteOffsets(ctx, "rg", topicsSet("neg", 0))
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := del.Lookup("neg", 0); !errors.Is(e, kerr.GroupSubscribedToTopic) {
		t.Fatalf("delete offsets of a consumed topic: %v", e)
	}
	cons.Close()
	del, err = adm.DeleteOffsets(ctx, "rg", topicsSet("neg", 0, 1))
	if err != nil || del.Error() != nil {
		t.Fatalf("delete offsets: %v %v", err, del.Error())
	}
	if _, ok := n.b.FetchOffset("rg", "neg", 0); ok {
		t.Fatal("offset still there after OffsetDelete")
	}
	if _, err := adm.DeleteOffsets(ctx, "nope", topicsSet("neg", 0)); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("unknown group: %v", err)
	}
}

// TestKadmLogDirsProducersMaxTimestamp: DescribeLogDirs reports the real
// size of each partition, DescribeProducers the idempotent producer that
// wrote, ListOffsets -3 the newest record.
func TestKadmLogDirsProducersMaxTimestamp(t *testing.T) {
	n := startNode(t, "")
	n.createTopic("ld", 2)
	adm := n.admin()
	ctx := testCtx(t, 30*time.Second)
	prod := n.client(kgo.DefaultProduceTopic("ld"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	base := time.UnixMilli(1_767_225_600_000)
	for i, at := range []int64{0, 9000, 3000} {
		r := &kgo.Record{Value: []byte("v"), Timestamp: base.Add(time.Duration(at) * time.Millisecond)}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := n.b.DescribeTopic("ld")
	found := false
	dirs.Each(func(d kadm.DescribedLogDir) {
		if d.Err != nil {
			t.Fatalf("dir %s: %v", d.Dir, d.Err)
		}
		if p, ok := d.Topics.Lookup("ld", 0); ok {
			found = true
			if p.Size != info.Partitions[0].SizeBytes || p.Size <= 0 {
				t.Fatalf("size %d, broker says %d", p.Size, info.Partitions[0].SizeBytes)
			}
		}
	})
	if !found {
		t.Fatalf("no log dir lists ld/0: %+v", dirs)
	}
	ps, err := adm.DescribeProducers(ctx, topicsSet("ld", 0))
	if err != nil {
		t.Fatal(err)
	}
	part := ps["ld"].Partitions[0]
	if part.Err != nil || len(part.ActiveProducers) != 1 {
		t.Fatalf("producers of ld/0: %+v", part)
	}
	for _, p := range part.ActiveProducers {
		if p.LastSequence != 2 || p.ProducerID < 0 {
			t.Fatalf("producer %+v, want last sequence 2", p)
		}
	}
	lo, err := adm.ListMaxTimestampOffsets(ctx, "ld")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := lo.Lookup("ld", 0); o.Err != nil || o.Offset != 1 || o.Timestamp != base.Add(9*time.Second).UnixMilli() {
		t.Fatalf("max timestamp of ld/0: %+v", o)
	}
	if o, _ := lo.Lookup("ld", 1); o.Err != nil || o.Offset != -1 {
		t.Fatalf("max timestamp of the empty ld/1: %+v", o)
	}
}

func topicsSet(topic string, partitions ...int32) kadm.TopicsSet {
	var s kadm.TopicsSet
	s.Add(topic, partitions...)
	return s
}

// TestKadmClusterOps: on one node, ElectLeaders finds nothing to elect,
// a reassignment to this node is a no-op and to another node refused, and
// no reassignment is ever listed.
func TestKadmClusterOps(t *testing.T) {
	n := startNode(t, "")
	n.createTopic("co", 2)
	adm := n.admin()
	ctx := testCtx(t, 30*time.Second)
	el, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, topicsSet("co", 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(2) {
		if r := el["co"][p]; !errors.Is(r.Err, kerr.ElectionNotNeeded) {
			t.Fatalf("elect co/%d: %+v", p, r)
		}
	}
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("co", 0, []int32{0})
	req.Assign("co", 1, []int32{0, 1})
	as, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if r := as["co"][0]; r.Err != nil {
		t.Fatalf("reassign to this node: %v", r.Err)
	}
	if r := as["co"][1]; !errors.Is(r.Err, kerr.InvalidReplicaAssignment) {
		t.Fatalf("reassign to a node that does not exist: %v", r.Err)
	}
	ls, err := adm.ListPartitionReassignments(ctx, topicsSet("co", 0, 1))
	if err != nil || len(ls) != 0 {
		t.Fatalf("list reassignments: %+v %v", ls, err)
	}
}
