package kafka

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnTopic is one topic of a TxnOffsetCommit: by id (v6) or name (v5),
// offsets of partitions 0, 1… in order.
type txnTopic struct {
	name    string
	id      [16]byte
	offsets []int64
	part    int32 // first partition
}

// txnOffsetsReq builds a TxnOffsetCommit of version v for x's producer.
func (x *txnRaw) txnOffsetsReq(v int16, group string, pid int64, topics ...txnTopic) *kmsg.TxnOffsetCommitRequest {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.SetVersion(v)
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = x.id, group, pid, x.epoch, -1
	for _, tt := range topics {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = tt.name, tt.id
		for i, off := range tt.offsets {
			p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			p.Partition, p.Offset = tt.part+int32(i), off
			rt.Partitions = append(rt.Partitions, p)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// heldOffset is an offset a transaction holds for a group.
type heldOffset struct {
	group, topic string
	part         int32
	off          int64
}

// pending is what transaction id holds: its groups and pending offsets.
func pending(t *testing.T, n *node, id string) (groups []string, offsets []heldOffset) {
	t.Helper()
	d, _, err := n.b.DescribeTransactions([]string{id})
	if err != nil || len(d) != 1 {
		t.Fatalf("describe %s: %+v %v", id, d, err)
	}
	for _, o := range d[0].Offsets {
		offsets = append(offsets, heldOffset{o.Group, o.Topic, o.Partition, o.Offset})
	}
	return d[0].Groups, offsets
}

// checkTxnCommit sends req and checks each topic's code (every partition
// of it) and that the answer names it by the id asked.
func checkTxnCommit(t *testing.T, what string, r *rawConn, req *kmsg.TxnOffsetCommitRequest, want []*kerr.Error) {
	t.Helper()
	resp := r.do(req).(*kmsg.TxnOffsetCommitResponse)
	if len(resp.Topics) != len(req.Topics) {
		t.Fatalf("%s: %d topics answered, want %d", what, len(resp.Topics), len(req.Topics))
	}
	for i, rt := range resp.Topics {
		if req.Version >= 6 && rt.TopicID != req.Topics[i].TopicID {
			t.Errorf("%s: topic %d answered as %x, want %x", what, i, rt.TopicID, req.Topics[i].TopicID)
		}
		if len(rt.Partitions) != len(req.Topics[i].Partitions) {
			t.Errorf("%s: topic %d: %d partitions answered, want %d", what, i, len(rt.Partitions), len(req.Topics[i].Partitions))
		}
		for _, p := range rt.Partitions {
			wantCode(t, fmt.Sprintf("%s: topic %d partition %d", what, i, p.Partition), p.ErrorCode, want[i])
		}
	}
}

// TestTxnOffsetCommitByTopicID: TxnOffsetCommit v6 (KIP-1319) names
// topics by id only. An id that names no topic (never made, zero, or a
// topic deleted and made again) answers UNKNOWN_TOPIC_ID for its
// partitions and holds nothing, while the known topics of the request get
// the request's one answer; a request of unknown ids alone leaves the
// transaction as it was (no group added, none begun). The held offsets
// become the group's at commit, the refused ones never.
func TestTxnOffsetCommitByTopicID(t *testing.T) {
	if apis[28].max < 6 {
		t.Fatalf("TxnOffsetCommit up to v%d, want 6", apis[28].max)
	}
	n := startNode(t, "")
	n.createTopic("tid", 2)
	n.createTopic("gone", 1)
	goneOld := n.topicID("gone")
	if err := n.b.DeleteTopic("gone"); err != nil {
		t.Fatal(err)
	}
	n.createTopic("gone", 1) // the same name, a new id
	id, never := n.topicID("tid"), [16]byte{9, 9, 9}
	unknownID := txnTopic{id: never, offsets: []int64{5}}
	r := n.raw()
	uti := kerr.UnknownTopicID
	for i, tc := range []struct {
		name    string
		v       int16
		group   string
		badPID  bool
		topics  []txnTopic
		want    []*kerr.Error
		held    []heldOffset // pending after
		groups  []string
		commits bool // then EndTxn v5 commits, and the held offsets are the group's
	}{
		{"unknown ids beside a known one", 6, "g", false,
			[]txnTopic{unknownID, {id: id, offsets: []int64{11, 12}}, {id: goneOld, offsets: []int64{9}}},
			[]*kerr.Error{uti, nil, uti}, []heldOffset{{"g", "tid", 0, 11}, {"g", "tid", 1, 12}}, []string{"g"}, true},
		{"unknown ids alone", 6, "g", false,
			[]txnTopic{unknownID, {offsets: []int64{6}}, {id: goneOld, offsets: []int64{7}}},
			[]*kerr.Error{uti, uti, uti}, nil, nil, false},
		{"a name without an id", 6, "g", false, []txnTopic{{name: "tid", offsets: []int64{8}}},
			[]*kerr.Error{uti}, nil, nil, false},
		{"the new id of a recreated topic", 6, "g", false, []txnTopic{{id: n.topicID("gone"), offsets: []int64{3}}},
			[]*kerr.Error{nil}, []heldOffset{{"g", "gone", 0, 3}}, []string{"g"}, true},
		{"an unknown partition of a known id", 6, "g", false,
			[]txnTopic{{id: id, part: 5, offsets: []int64{1}}, unknownID},
			[]*kerr.Error{kerr.UnknownTopicOrPartition, uti}, nil, nil, false},
		{"a wrong producer id", 6, "g", true, []txnTopic{{id: id, offsets: []int64{1}}, unknownID},
			[]*kerr.Error{kerr.InvalidProducerIDMapping, uti}, nil, nil, false},
		{"an empty group id", 6, "", false, []txnTopic{{id: id, offsets: []int64{1}}, unknownID},
			[]*kerr.Error{kerr.InvalidGroupID, uti}, nil, nil, false},
		{"an offset below -2", 6, "g", false, []txnTopic{{id: id, offsets: []int64{-3}}, unknownID},
			[]*kerr.Error{kerr.InvalidCommitOffsetSize, uti}, nil, nil, false},
		{"v5 still by name", 5, "g", false, []txnTopic{{name: "tid", offsets: []int64{21}}},
			[]*kerr.Error{nil}, []heldOffset{{"g", "tid", 0, 21}}, []string{"g"}, true},
	} {
		x := initTxnRaw(t, r, fmt.Sprintf("tid-%d", i))
		pid := x.pid
		if tc.badPID {
			pid += 7
		}
		before, _ := n.b.FetchOffset("g", "tid", 0)
		checkTxnCommit(t, tc.name, r, x.txnOffsetsReq(tc.v, tc.group, pid, tc.topics...), tc.want)
		groups, held := pending(t, n, x.id)
		if !slices.Equal(held, tc.held) || !slices.Equal(groups, tc.groups) {
			t.Errorf("%s: the transaction holds %v of groups %v, want %v of %v", tc.name, held, groups, tc.held, tc.groups)
		}
		if !tc.commits {
			// Nothing began: there is nothing to commit, and the
			// group's offsets are what they were.
			wantCode(t, tc.name+": EndTxn v5 commit", first(x.endV(5, x.epoch, true)), kerr.InvalidTxnState)
			if after, _ := n.b.FetchOffset("g", "tid", 0); after != before {
				t.Errorf("%s: g's offset of tid/0 went from %+v to %+v", tc.name, before, after)
			}
			continue
		}
		wantCode(t, tc.name+": EndTxn v5 commit", first(x.endV(5, x.epoch, true)), nil)
		for _, h := range tc.held {
			if got, ok := n.b.FetchOffset(h.group, h.topic, h.part); !ok || got.Offset != h.off {
				t.Errorf("%s: after commit %s's %s/%d is %+v (found %v), want %d", tc.name, h.group, h.topic, h.part, got, ok, h.off)
			}
		}
	}
	// The refused ids stored nothing anywhere: not in the recreated topic
	// (whose old id was refused twice), not for the empty group.
	if got, ok := n.b.FetchOffset("g", "gone", 0); !ok || got.Offset != 3 {
		t.Errorf("gone/0: %+v (found %v), want only the commit by its new id (3)", got, ok)
	}
	if got, ok := n.b.FetchOffset("", "tid", 0); ok {
		t.Errorf("the empty group holds %+v", got)
	}
}

// TestTxnOffsetCommitByTopicIDAuthorization: the whole request's
// refusals (the producer, the group) answer every partition, unknown ids
// included; a topic the principal may not consume is refused beside the
// unknown ids, each with its own code; none holds anything.
func TestTxnOffsetCommitByTopicIDAuthorization(t *testing.T) {
	n := startAuthNode(t, testUsers, Config{}, "orders", "secret")
	orders, secret, never := n.topicID("orders"), n.topicID("secret"), [16]byte{7}
	alice := n.asUser("alice")
	x := initTxnRaw(t, alice, "auth-v6")
	uti := kerr.UnknownTopicID
	for _, tc := range []struct {
		name  string
		r     *rawConn
		group string
		ids   [][16]byte
		want  []*kerr.Error
		held  []heldOffset
	}{
		{"a principal that may not produce", n.asUser("bob"), "g1", [][16]byte{orders, never},
			[]*kerr.Error{kerr.TransactionalIDAuthorizationFailed, kerr.TransactionalIDAuthorizationFailed}, nil},
		{"a group the principal may not consume", alice, "h1", [][16]byte{orders, never},
			[]*kerr.Error{kerr.GroupAuthorizationFailed, kerr.GroupAuthorizationFailed}, nil},
		{"a topic the principal may not consume", alice, "g1", [][16]byte{secret, never},
			[]*kerr.Error{kerr.TopicAuthorizationFailed, uti}, nil},
		{"allowed", alice, "g1", [][16]byte{orders, never},
			[]*kerr.Error{nil, uti}, []heldOffset{{"g1", "orders", 0, 4}}},
	} {
		var topics []txnTopic
		for _, id := range tc.ids {
			topics = append(topics, txnTopic{id: id, offsets: []int64{4}})
		}
		checkTxnCommit(t, tc.name, tc.r, x.txnOffsetsReq(6, tc.group, x.pid, topics...), tc.want)
		if _, held := pending(t, n.node, x.id); !slices.Equal(held, tc.held) {
			t.Errorf("%s: the transaction holds %v, want %v", tc.name, held, tc.held)
		}
	}
}
