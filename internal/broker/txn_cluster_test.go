package broker

import (
	"errors"
	"testing"
	"time"
)

// TestTxnRefusedInCluster: a cluster node refuses a transactional
// producer with ErrTransactionsInCluster (the coordinator is not
// replicated) rather than accepting transactions a failover would lose.
func TestTxnRefusedInCluster(t *testing.T) {
	c := newMemCluster(t, 1)
	b := c.nodes[1].b
	if _, err := b.InitTransactionalProducer("etl", time.Minute, TxnProducer{ID: -1, Epoch: -1}); !errors.Is(err, ErrTransactionsInCluster) {
		t.Fatalf("transactional init on a cluster node: %v", err)
	}
	if _, err := b.AddPartitionsToTxn("etl", 0, 0, nil); !errors.Is(err, ErrTransactionsInCluster) {
		t.Fatalf("add partitions on a cluster node: %v", err)
	}
	if _, err := b.InitProducerID(""); err != nil {
		t.Fatalf("idempotent producers still work: %v", err)
	}
}
