package client_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-mq/sluice/client"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
	"github.com/sluice-mq/sluice/proto/sluice/v1/sluicev1connect"
)

// spreadLeaders is a node that leads none of a topic's partitions and cannot fan a Fetch
// out (a TLS listener): a Fetch of several partitions answers NOT_LEADER in each; one of
// a single partition, as its leader would, has partition 0's record after 100 ms and
// nothing in partition 1 (it waits max_wait) or, with slowRecord, a record after 300 ms.
type spreadLeaders struct {
	sluicev1connect.UnimplementedTopicServiceHandler
	slowRecord bool
}

func (f spreadLeaders) Fetch(ctx context.Context, req *connect.Request[sluicev1.FetchRequest]) (*connect.Response[sluicev1.FetchResponse], error) {
	out := &sluicev1.FetchResponse{}
	ps := req.Msg.GetPartitions()
	for _, p := range ps {
		pr := &sluicev1.PartitionRecords{Partition: p.GetPartition(), NextOffset: p.GetOffset()}
		if len(ps) > 1 {
			pr.Error = &sluicev1.ErrorInfo{Reason: "NOT_LEADER", Metadata: map[string]string{"leader": "2"}}
		}
		out.Partitions = append(out.Partitions, pr)
	}
	if len(ps) == 1 {
		wait := req.Msg.GetMaxWait().AsDuration()
		if ps[0].GetPartition() == 0 {
			wait = 100 * time.Millisecond
			out.Partitions[0].Records = []*sluicev1.Record{{Offset: ps[0].GetOffset(), Value: []byte("r")}}
			out.Partitions[0].NextOffset++
		} else if f.slowRecord {
			wait = 300 * time.Millisecond
			out.Partitions[0].Records = []*sluicev1.Record{{Offset: ps[0].GetOffset(), Value: []byte("s")}}
			out.Partitions[0].NextOffset++
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
	return connect.NewResponse(out), nil
}

// TestSplitFetch: a long-polled Fetch the client splits by leader answers once one
// partition has records, not when another partition's wait ends; the partition cut short
// answers nothing, from where it was asked, without an error. Without a wait nothing is
// cut: a partition slower to answer keeps its records.
func TestSplitFetch(t *testing.T) {
	for _, tc := range []struct {
		name       string
		wait       time.Duration
		slowRecord bool
		want1      int // records of partition 1
	}{
		{"a long poll ends at the first records", 10 * time.Second, false, 0},
		{"without a wait every partition answers", 0, true, 1},
	} {
		_, h := sluicev1connect.NewTopicServiceHandler(spreadLeaders{slowRecord: tc.slowRecord})
		srv := httptest.NewServer(h)
		defer srv.Close()
		c := client.New(srv.URL)
		began := time.Now()
		res, err := c.Fetch(t.Context(), &client.FetchRequest{Topic: "t", MaxWait: durationpb.New(tc.wait),
			Partitions: []*client.PartitionOffset{{Partition: 0, Offset: 5}, {Partition: 1, Offset: 7}}})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if took := time.Since(began); took > 3*time.Second {
			t.Errorf("%s: answered after %v: it waited for partition 1's wait to end", tc.name, took)
		}
		p0, p1 := res.GetPartitions()[0], res.GetPartitions()[1]
		if len(p0.GetRecords()) != 1 || p0.GetNextOffset() != 6 {
			t.Errorf("%s: partition 0: %v, want its record", tc.name, p0)
		}
		if p1.GetError() != nil || len(p1.GetRecords()) != tc.want1 || p1.GetNextOffset() != 7+int64(tc.want1) || p1.GetPartition() != 1 {
			t.Errorf("%s: partition 1: %v, want %d records from offset 7, no error", tc.name, p1, tc.want1)
		}
	}
}
