package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
	"github.com/sluice-mq/sluice/proto/sluice/v1/sluicev1connect"
)

// fakeLeader is a TopicService leading the partitions in records: a Fetch answers each
// partition asked with its records from the offset asked (none: it waits max_wait, or
// until ctx ends), tagged with what it was sent (credential, forwarding mark); denied
// answers PERMISSION_DENIED. ListOffsets answers each partition's record count.
type fakeLeader struct {
	sluicev1connect.UnimplementedTopicServiceHandler
	records map[int32][]string
	denied  bool
}

func (f *fakeLeader) Fetch(ctx context.Context, req *connect.Request[sluicev1.FetchRequest]) (*connect.Response[sluicev1.FetchResponse], error) {
	if f.denied {
		return nil, apiError(connect.CodePermissionDenied, ReasonPermissionDenied, fmt.Errorf("no"), nil)
	}
	tag := req.Header().Get("Authorization") + "|" + req.Header().Get(forwardedHeader)
	out := &sluicev1.FetchResponse{}
	n := 0
	for _, p := range req.Msg.GetPartitions() {
		pr := &sluicev1.PartitionRecords{Partition: p.GetPartition(), NextOffset: p.GetOffset()}
		for off := p.GetOffset(); off < int64(len(f.records[p.GetPartition()])); off++ {
			pr.Records = append(pr.Records, &sluicev1.Record{Offset: off, Key: []byte(tag), Value: []byte(f.records[p.GetPartition()][off])})
			pr.NextOffset = off + 1
		}
		n += len(pr.Records)
		out.Partitions = append(out.Partitions, pr)
	}
	if n == 0 && req.Msg.GetMaxWait().AsDuration() > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(req.Msg.GetMaxWait().AsDuration()):
		}
	}
	return connect.NewResponse(out), nil
}

func (f *fakeLeader) ListOffsets(_ context.Context, req *connect.Request[sluicev1.ListOffsetsRequest]) (*connect.Response[sluicev1.ListOffsetsResponse], error) {
	out := &sluicev1.ListOffsetsResponse{}
	for _, p := range req.Msg.GetPartitions() {
		out.Partitions = append(out.Partitions, &sluicev1.PartitionOffsetResult{Partition: p, Offset: int64(len(f.records[p]))})
	}
	return connect.NewResponse(out), nil
}

// fanOutNode is node 1's topicService (no broker: only partitions led elsewhere are
// asked of it) over fake leaders 2, 3, ...
func fanOutNode(t *testing.T, leaders ...*fakeLeader) *topicService {
	addrs := map[int32]string{}
	for i, l := range leaders {
		_, h := sluicev1connect.NewTopicServiceHandler(l)
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		addrs[int32(i+2)] = strings.TrimPrefix(srv.URL, "http://")
	}
	f := newForwarder(1, func(id int32) string { return addrs[id] }, 1<<20, nil, func(int32, error) {})
	return &topicService{API: &API{fwd: f, log: slog.New(slog.DiscardHandler)}}
}

func fetchReq(wait time.Duration, offsets ...int64) *sluicev1.FetchRequest {
	m := &sluicev1.FetchRequest{Topic: "t", MaxWait: durationpb.New(wait)}
	for p, off := range offsets {
		m.Partitions = append(m.Partitions, &sluicev1.PartitionOffset{Partition: int32(p), Offset: off})
	}
	return m
}

// notLedAnswer is node 1's own first answer: NOT_LEADER naming leaders[p] for partition p.
func notLedAnswer(m *sluicev1.FetchRequest, leaders ...int32) *sluicev1.FetchResponse {
	out := &sluicev1.FetchResponse{}
	for i, p := range m.GetPartitions() {
		out.Partitions = append(out.Partitions, &sluicev1.PartitionRecords{Partition: p.GetPartition(), NextOffset: p.GetOffset(),
			Error: &sluicev1.ErrorInfo{Reason: ReasonNotLeader, Metadata: map[string]string{"leader": fmt.Sprint(leaders[i])}}})
	}
	return out
}

// TestFetchFromLeaders: the partitions of a Fetch led by two other nodes are read at
// each, with the caller's credential and this node's forwarding mark, and come back in
// the order asked; a leader's refusal other than NOT_LEADER replaces the partitions' own.
func TestFetchFromLeaders(t *testing.T) {
	ctx := context.Background()
	n := fanOutNode(t, &fakeLeader{records: map[int32][]string{0: {"a0", "a1"}, 2: {"c0"}}},
		&fakeLeader{records: map[int32][]string{1: {"b0", "b1", "b2"}}}, &fakeLeader{denied: true})
	hdr := http.Header{"Authorization": {"Bearer tok"}}
	m := fetchReq(0, 1, 0, 0, 0)
	out := notLedAnswer(m, 2, 3, 2, 4)
	got := n.fetchFrom(ctx, hdr, m, out, ledElsewhere(out), 0)
	if got != 5 {
		t.Errorf("fetchFrom counted %d records, want 5", got)
	}
	var seen []string
	for i, pr := range out.GetPartitions() {
		if i == 3 {
			if pr.GetError().GetReason() != ReasonPermissionDenied {
				t.Errorf("partition 3 (its leader refuses): %v, want PERMISSION_DENIED", pr.GetError())
			}
			continue
		}
		if pr.GetPartition() != int32(i) || pr.GetError() != nil {
			t.Fatalf("position %d: %v", i, pr)
		}
		for _, r := range pr.GetRecords() {
			seen = append(seen, fmt.Sprintf("%d:%s:%s", i, r.GetValue(), r.GetKey()))
		}
	}
	want := "0:a1:Bearer tok|1 1:b0:Bearer tok|1 1:b1:Bearer tok|1 1:b2:Bearer tok|1 2:c0:Bearer tok|1"
	if strings.Join(seen, " ") != want {
		t.Errorf("got %s\nwant %s", strings.Join(seen, " "), want)
	}
}

// TestWaitAnywhereEndsAtTheFirstRecords: a long poll over partitions led by two nodes
// answers once one of them has records, not when the other's wait ends; and waits the
// whole time when none has any.
func TestWaitAnywhereEndsAtTheFirstRecords(t *testing.T) {
	ctx := context.Background()
	n := fanOutNode(t, &fakeLeader{records: map[int32][]string{0: {"a0"}}}, &fakeLeader{})
	for _, tc := range []struct {
		name    string
		offsets []int64
		want    bool
		atLeast time.Duration
		within  time.Duration
	}{
		{"records on node 2", []int64{0, 0}, true, 0, 3 * time.Second},
		{"nothing anywhere", []int64{1, 0}, false, 300 * time.Millisecond, 3 * time.Second},
	} {
		m := fetchReq(300*time.Millisecond, tc.offsets...)
		if tc.want {
			m.MaxWait = durationpb.New(10 * time.Second) // node 3 would wait it all
		}
		out := notLedAnswer(m, 2, 3)
		began := time.Now()
		got := n.waitAnywhere(ctx, nil, m, out, ledElsewhere(out), m.GetMaxWait().AsDuration())
		took := time.Since(began)
		if got != tc.want || took < tc.atLeast || took > tc.within {
			t.Errorf("%s: waitAnywhere = %v after %v, want %v within [%v, %v]", tc.name, got, took, tc.want, tc.atLeast, tc.within)
		}
	}
}

// TestTrimFetch: a fanned-out answer keeps max_records and about max_bytes in all, the
// first partitions' first; a cut partition's next offset is its first record left out.
func TestTrimFetch(t *testing.T) {
	part := func(p int32, from int64, values ...string) *sluicev1.PartitionRecords {
		pr := &sluicev1.PartitionRecords{Partition: p, NextOffset: from + int64(len(values))}
		for i, v := range values {
			pr.Records = append(pr.Records, &sluicev1.Record{Offset: from + int64(i), Value: []byte(v)})
		}
		return pr
	}
	for _, tc := range []struct {
		name       string
		maxRecords int
		maxBytes   int64
		want       string // per partition: records kept/next offset
	}{
		{"within both", 10, 100, "3/13 2/22 0/30"},
		{"records cut in the second", 4, 100, "3/13 1/21 0/30"},
		{"records cut at the first's end", 3, 100, "3/13 0/20 0/30"},
		{"bytes cut in the first", 10, 5, "2/12 0/20 0/30"},
		{"one record even if bigger", 10, 1, "1/11 0/20 0/30"},
		{"defaults", 0, 0, "3/13 2/22 0/30"},
	} {
		out := &sluicev1.FetchResponse{Partitions: []*sluicev1.PartitionRecords{
			part(0, 10, "aa", "bb", "cc"), part(1, 20, "dd", "ee"), part(2, 30)}}
		trimFetch(out, tc.maxRecords, tc.maxBytes)
		var got []string
		for _, pr := range out.GetPartitions() {
			got = append(got, fmt.Sprintf("%d/%d", len(pr.GetRecords()), pr.GetNextOffset()))
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, strings.Join(got, " "), tc.want)
		}
	}
}

// TestListOffsetsFromLeaders: partitions led by two nodes resolved at each, in the order
// asked; a leader with no known address fails the call with the NOT_LEADER met.
func TestListOffsetsFromLeaders(t *testing.T) {
	ctx := context.Background()
	n := fanOutNode(t, &fakeLeader{records: map[int32][]string{0: {"a"}, 2: {"a", "b", "c"}}},
		&fakeLeader{records: map[int32][]string{1: {"a", "b"}}})
	m := &sluicev1.ListOffsetsRequest{Topic: "t"}
	parts := []int32{0, 1, 2}
	out := make([]*sluicev1.PartitionOffsetResult, 3)
	if err := n.listOffsetsFrom(ctx, nil, m, parts, out, map[int32][]int{2: {0, 2}, 3: {1}}, nil); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int64{1, 2, 3} {
		if out[i].GetPartition() != int32(i) || out[i].GetOffset() != want {
			t.Errorf("position %d: %v, want partition %d at %d", i, out[i], i, want)
		}
	}
	notLed := notLeaderErr(9)
	if err := n.listOffsetsFrom(ctx, nil, m, parts, out, map[int32][]int{2: {0}, 9: {1, 2}}, notLed); err != notLed {
		t.Errorf("a leader without an address: %v, want the NOT_LEADER met", err)
	}
}
