package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/meta"
)

// TestClusterCreateBeforeEveryNodeRegisteredIsRetried: a topic or queue created while
// some of the cluster's nodes have not registered yet (a moment after the cluster
// started) is refused with an error clients retry (NOT_LEADER of the catalog, Kafka's
// NOT_CONTROLLER, SQS's ServiceUnavailable), not INVALID_ARGUMENT; once every node has
// registered it is created.
func TestClusterCreateBeforeEveryNodeRegisteredIsRetried(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster")
	}
	c := startMemClusterUnregistered(&memCluster{t: t}, 3)
	b1 := c.nodes[1].b
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := b1.cluster.cat.RegisterNode(ctx, meta.Node{ID: 1, KafkaAddr: "n1:9092"}); err != nil {
		t.Fatal(err)
	}
	_, err := b1.CreateTopic(TopicSettings{Name: "early", Partitions: 1})
	var nl *NotLeaderError
	if !errors.As(err, &nl) || !nl.Catalog || nl.Why == "" {
		t.Fatalf("create with 1 of 3 nodes registered: %v (%T); want a catalog refusal to retry", err, err)
	}
	t.Logf("refused: %v", err)
	_, err = b1.CreateQueue(QueueSettings{Name: "early-q"})
	if !errors.As(err, &nl) || !nl.Catalog {
		t.Fatalf("queue create with 1 of 3 nodes registered: %v", err)
	}
	c.register()
	if _, err := b1.CreateTopic(TopicSettings{Name: "early", Partitions: 1}); err != nil {
		t.Fatalf("create once every node registered: %v", err)
	}
}
