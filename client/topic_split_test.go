package client

import (
	"testing"

	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// TestTrimToMaxRecords: an answer put together from several fetches keeps the records
// limit, the first partitions' records first, and a cut partition resumes at its first
// record left out.
func TestTrimToMaxRecords(t *testing.T) {
	part := func(p int32, from int64, n int) *sluicev1.PartitionRecords {
		pr := &sluicev1.PartitionRecords{Partition: p, NextOffset: from + int64(n)}
		for i := range n {
			pr.Records = append(pr.Records, &sluicev1.Record{Offset: from + int64(i)})
		}
		return pr
	}
	tests := []struct {
		name      string
		limit     int32
		sizes     []int
		wantSizes []int
		wantNext  []int64
	}{
		{"under the limit", 10, []int{3, 4}, []int{3, 4}, []int64{13, 24}},
		{"exactly the limit", 7, []int{3, 4}, []int{3, 4}, []int64{13, 24}},
		{"cut in the second", 5, []int{3, 4}, []int{3, 2}, []int64{13, 22}},
		{"cut in the first", 2, []int{3, 4}, []int{2, 0}, []int64{12, 20}},
		{"the default of 500", 0, []int{400, 200}, []int{400, 100}, []int64{410, 120}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := &sluicev1.FetchResponse{}
			for i, n := range tc.sizes {
				res.Partitions = append(res.Partitions, part(int32(i), int64(10*(i+1)), n))
			}
			trimToMaxRecords(res, tc.limit)
			for i, pr := range res.GetPartitions() {
				if len(pr.GetRecords()) != tc.wantSizes[i] || pr.GetNextOffset() != tc.wantNext[i] {
					t.Fatalf("partition %d: %d records, next %d; want %d, next %d",
						i, len(pr.GetRecords()), pr.GetNextOffset(), tc.wantSizes[i], tc.wantNext[i])
				}
			}
		})
	}
}
