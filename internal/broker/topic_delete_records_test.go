package broker

import (
	"errors"
	"testing"
)

// TestDeleteRecordsRefusedInCluster: a replicated partition refuses DeleteRecords rather
// than moving one replica's log start (the others would still serve the records, and a
// replica pull would bring them back). Nothing changes.
func TestDeleteRecordsRefusedInCluster(t *testing.T) {
	c := newMemCluster(t, 1)
	b := c.nodes[1].b
	if _, err := b.CreateTopic(TopicSettings{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	c.produceTo("t", "r", 3)
	l := c.leaderOf("t", 0)
	if _, err := l.DeleteRecords("t", 0, 1); !errors.Is(err, ErrDeleteRecordsInCluster) {
		t.Fatalf("DeleteRecords on a replicated partition: %v", err)
	}
	_, p, err := l.streams.partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if s := p.log.LogStartOffset(); s != 0 {
		t.Fatalf("log start %d after a refused DeleteRecords", s)
	}
}
