package kafka

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/broker"
)

// listGroups sends ListGroups at the highest version with the filters and
// renders each group as "id type state protocolType", sorted.
func listGroups(t *testing.T, r *rawConn, types, states []string) []string {
	t.Helper()
	lg := kmsg.NewPtrListGroupsRequest()
	lg.Version, lg.TypesFilter, lg.StatesFilter = apis[16].max, types, states
	resp := r.do(lg).(*kmsg.ListGroupsResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("list groups: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	var out []string
	for _, g := range resp.Groups {
		out = append(out, fmt.Sprintf("%s %s %s %s", g.Group, g.GroupType, g.GroupState, g.ProtocolType))
	}
	slices.Sort(out)
	return out
}

// Share groups are groups of type "share" in ListGroups (KIP-932): one
// with members is Stable, one with only a config or a subscription (a
// native subscription is the share group of its name) is Empty, and after
// a restart, before any member is back, a share group is still listed by
// its subscription. DescribeGroups describes classic groups only, so a
// share group is answered as Kafka answers it: not found (v6+), Dead
// before. A share group id that is also a classic group's is listed once,
// as the classic group. DeleteGroups deletes an empty share group with its
// subscriptions and config, refuses one with members and changes nothing.
func TestShareGroupsListedAndDeleted(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir)
	n.createTopic("sl", 1)
	r := n.raw()
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Version, oc.Group, oc.Generation = apis[8].max, "classic-g", -1
	oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "sl", TopicID: n.topicID("sl"), Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Offset: 1}}}}
	if resp := r.do(oc).(*kmsg.OffsetCommitResponse); resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
	}
	m := n.shareMember(t, "sg", "member-a", "sl")
	if code := setShareConfig(t, n, "configured", "share.auto.offset.reset", "earliest"); code != 0 {
		t.Fatalf("alter configs: %v", kerr.ErrorForCode(code))
	}
	for _, name := range []string{"native", "classic-g"} {
		if _, err := n.b.CreateSubscription(broker.SubscriptionSettings{Topic: "sl", Name: name}); err != nil {
			t.Fatal(err)
		}
	}

	all := []string{
		"classic-g classic Empty ",
		"configured share Empty share",
		"native share Empty share",
		"sg share Stable share",
	}
	for _, tc := range []struct {
		name          string
		types, states []string
		want          []string
	}{
		{"every group", nil, nil, all},
		{"share only", []string{"Share"}, nil, all[1:]},
		{"classic only", []string{"classic"}, nil, all[:1]},
		{"stable", nil, []string{"stable"}, all[3:]},
		{"consumer", []string{"consumer"}, nil, nil},
	} {
		if got := listGroups(t, r, tc.types, tc.states); !slices.Equal(got, tc.want) {
			t.Errorf("%s: listed\n%s\nwant\n%s", tc.name, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}

	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version, dg.Groups = apis[15].max, []string{"sg", "native", "classic-g"}
	resp := r.do(dg).(*kmsg.DescribeGroupsResponse)
	for i, want := range []int16{kerr.GroupIDNotFound.Code, kerr.GroupIDNotFound.Code, 0} {
		if g := resp.Groups[i]; g.ErrorCode != want {
			t.Errorf("describe %s v%d: %v, want %v", g.Group, dg.Version, kerr.ErrorForCode(g.ErrorCode), kerr.ErrorForCode(want))
		}
	}
	if msg := resp.Groups[0].ErrorMessage; msg == nil || !strings.Contains(*msg, "not a classic group") {
		t.Errorf("describe of a share group: message %v", msg)
	}
	dg.Version = 5
	if g := r.do(dg).(*kmsg.DescribeGroupsResponse).Groups[0]; g.ErrorCode != 0 || g.State != "Dead" {
		t.Errorf("describe v5 of a share group: %v %s, want Dead with no error", kerr.ErrorForCode(g.ErrorCode), g.State)
	}

	if hb := m.heartbeat(-1, nil); hb.ErrorCode != 0 {
		t.Fatalf("leave: %v", kerr.ErrorForCode(hb.ErrorCode))
	}
	if got := listGroups(t, r, []string{"share"}, []string{"Stable"}); len(got) != 0 {
		t.Errorf("after the last member left, stable share groups: %v", got)
	}

	n.stop()
	n = startNode(t, dir)
	if got, want := listGroups(t, n.raw(), []string{"share"}, nil), []string{
		"configured share Empty share", "native share Empty share", "sg share Empty share",
	}; !slices.Equal(got, want) {
		t.Errorf("after a restart: %v, want %v", got, want)
	}
	sgd := kmsg.NewPtrShareGroupDescribeRequest()
	sgd.Version, sgd.GroupIDs = 1, []string{"sg", "never"}
	d := n.raw().do(sgd).(*kmsg.ShareGroupDescribeResponse)
	if d.Groups[0].ErrorCode != 0 || d.Groups[0].GroupState != "Empty" || d.Groups[1].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("ShareGroupDescribe after a restart: sg %v %s, never %v", kerr.ErrorForCode(d.Groups[0].ErrorCode),
			d.Groups[0].GroupState, kerr.ErrorForCode(d.Groups[1].ErrorCode))
	}

	// Deleting: one with a member is refused and keeps its state.
	n.createTopic("sl2", 1)
	busy := n.shareMember(t, "busy", "member-b", "sl2")
	del := func(ids ...string) []int16 {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Version, req.Groups = apis[42].max, ids
		var codes []int16
		for _, g := range n.raw().do(req).(*kmsg.DeleteGroupsResponse).Groups {
			codes = append(codes, g.ErrorCode)
		}
		return codes
	}
	if got, want := del("busy", "never"), []int16{kerr.NonEmptyGroup.Code, kerr.GroupIDNotFound.Code}; !slices.Equal(got, want) {
		t.Fatalf("delete busy, never: %v, want %v", got, want)
	}
	if subs, _ := n.b.ListSubscriptions("sl2"); len(subs) != 1 {
		t.Fatalf("a refused delete changed the subscriptions: %v", subs)
	}
	if hb := busy.heartbeat(-1, nil); hb.ErrorCode != 0 {
		t.Fatalf("leave: %v", kerr.ErrorForCode(hb.ErrorCode))
	}
	if got, want := del("sg", "configured", "busy"), []int16{0, 0, 0}; !slices.Equal(got, want) {
		t.Fatalf("delete sg, configured, busy: %v, want %v", got, want)
	}
	if subs, _ := n.b.ListSubscriptions("sl"); len(subs) != 2 || subs[0].Name != "classic-g" || subs[1].Name != "native" {
		t.Errorf("subscriptions of sl after deleting sg: %v, want classic-g and native", subs)
	}
	if got, want := listGroups(t, n.raw(), []string{"share"}, nil), []string{"native share Empty share"}; !slices.Equal(got, want) {
		t.Errorf("after deleting: %v, want %v", got, want)
	}
	if v := n.b.ShareGroupConfig("configured"); v != broker.DefaultShareConfig() {
		t.Errorf("the deleted group's config is still there: %+v", v)
	}
}
