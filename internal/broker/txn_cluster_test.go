package broker

import (
	"errors"
	"testing"
	"time"
)

// TestTxnVersionsRefusedInCluster: a cluster node serves KIP-98 transactions (its
// controller coordinates them: cluster_txn_test.go) but refuses KIP-890 part 2's requests,
// which it does not advertise (EndTxn v5, produce v12's implicit add, TxnOffsetCommit v5:
// their implicit steps need the coordinator on the partition's node), and a topic of its
// own in a transaction.
func TestTxnVersionsRefusedInCluster(t *testing.T) {
	c := newMemCluster(t, 1)
	_, b := c.coordinator()
	p, err := b.InitTransactionalProducer("etl", time.Minute, TxnProducer{ID: -1, Epoch: -1})
	if err != nil {
		t.Fatalf("transactional init on the controller: %v", err)
	}
	if _, err := b.EndTxnBump("etl", p.ID, p.Epoch, false); !errors.Is(err, ErrTxnVersionInCluster) {
		t.Fatalf("EndTxn v5: %v", err)
	}
	if err := b.AddTxnPartitionsImplicit(p.ID, p.Epoch, []TxnPartition{{Topic: "t"}}); !errors.Is(err, ErrTxnVersionInCluster) {
		t.Fatalf("produce v12's add: %v", err)
	}
	if _, err := b.InitProducerID(""); err != nil {
		t.Fatalf("idempotent producers: %v", err)
	}
	// A topic of this node's own (as one it had before it joined) cannot be in a
	// transaction: no partition leader would write its markers.
	if _, err := b.createTopicLocal(TopicSettings{Name: "local", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	errs, err := b.AddPartitionsToTxn("etl", p.ID, p.Epoch, []TxnPartition{{Topic: "local", Partition: 0}})
	if err != nil || !errors.Is(errs[0], ErrUnknownPartition) {
		t.Fatalf("a local topic added to a transaction: %v %v", errs, err)
	}
}
