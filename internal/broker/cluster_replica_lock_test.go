package broker

import (
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// TestReplicaApplyNeverHoldsProducerLockForTopic: a replica's Apply takes its topic's lock
// (notifySubs, to wake subscriptions) only after releasing the partition's producer lock.
// topicRT.close takes them the other way round, the topic's and then each partition's;
// an Apply that held the producer lock while it waited for the topic's deadlocked with a
// broker closing while its Ready loop applied (memCluster.stop, which closes the broker
// without waiting for the host's Run to return: TestClusterWipedReplicaPulls hung in its
// cleanup in a -count=15 run under load).
func TestReplicaApplyNeverHoldsProducerLockForTopic(t *testing.T) {
	b, err := Open(Options{Dir: "/data", FS: vfs.NewMem(), Logger: quietLogger(), HeadroomBytes: testHeadroom})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if _, err := b.CreateTopic(TopicSettings{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	top, p, err := b.streams.partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	r := &replicaLog{b: b, p: p, appliedEnd: -1}
	if err := r.Restore(nil); err != nil {
		t.Fatal(err)
	}
	raw, err := batch.Build([]batch.Record{{Timestamp: 1, Value: []byte("a")}}, batch.Options{LeaderEpoch: -1})
	if err != nil {
		t.Fatal(err)
	}

	top.mu.Lock() // as topicRT.close holds it, before it takes each partition's producer lock
	held := true
	release := func() {
		if held {
			held = false
			top.mu.Unlock()
		}
	}
	defer release()
	applied := make(chan error, 1)
	go func() {
		_, err := r.Apply(2, [][]byte{raw})
		applied <- err
	}()
	// The record is appended under the producer lock; from then on Apply wants the topic's.
	for deadline := time.Now().Add(10 * time.Second); p.log.HighWatermark() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Apply appended nothing in 10 s")
		}
	}
	got := make(chan struct{})
	go func() {
		p.prod.Lock()
		defer p.prod.Unlock()
		close(got)
	}()
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		release() // lets Apply, then the goroutine above, finish
		t.Fatal("Apply held the partition's producer lock while it waited for the topic's lock")
	}
	release()
	if err := <-applied; err != nil {
		t.Fatal(err)
	}
}
