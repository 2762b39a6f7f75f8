package broker

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// TestClusterTxnDeposedControllerMarkersIgnored is the markers' hazard on a live cluster:
// the controller commits its decision and is cut off the network before writing any
// marker; the others elect a new controller, which finishes the transaction, and the
// producer's next transaction writes to every partition. Then the old controller comes
// back and its completion, still running, has the partitions' leaders write its markers.
// They are stale: the next transaction stays open (its records invisible to
// read_committed readers until its own commit), and every record is seen once.
func TestClusterTxnDeposedControllerMarkersIgnored(t *testing.T) {
	e := newClusterTxnEnv(t, 3)
	p := e.producer("etl")
	if err := p.produce("t1", 0, 1, 2); err != nil {
		t.Fatal(err)
	}
	oldID, old := e.c.coordinator()
	entered, release := make(chan struct{}), make(chan struct{})
	var once, releaseOnce sync.Once
	hook := func() {
		once.Do(func() { close(entered) })
		<-release
	}
	old.cluster.txn.beforeMarkers.Store(&hook)
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	ended := make(chan error, 1)
	go func() { ended <- old.EndTxn(p.id, p.pid.ID, p.pid.Epoch, true) }()
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the completion never started")
	}
	var others []multiraft.NodeID
	for _, id := range e.c.ids {
		if id != oldID {
			others = append(others, id)
		}
	}
	e.c.net.Partition([]multiraft.NodeID{oldID}, others)
	e.cut[oldID] = true
	want := [][]string{{"t1-0"}, {"t1-1"}, {"t1-2"}}
	if got := e.settled(3); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("after the new controller finished: %v, want %v", got, want)
	}
	if err := p.produce("t2", 0, 1, 2); err != nil {
		t.Fatal(err)
	}

	e.c.net.Heal()
	delete(e.cut, oldID)
	releaseOnce.Do(func() { close(release) })
	select {
	case err := <-ended:
		t.Logf("the deposed controller's EndTxn returned: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the deposed controller's completion never ended")
	}
	for part := range int32(3) {
		got, st := e.visible(part)
		if !slices.Equal(got, want[part]) || st.LastStableOffset >= st.HighWatermark {
			t.Fatalf("out/%d after the stale markers: visible %v, %+v; want %v and the second transaction open",
				part, got, st, want[part])
		}
	}
	if err := p.end(true); err != nil {
		t.Fatal(err)
	}
	for part := range 3 {
		want[part] = append(want[part], fmt.Sprintf("t2-%d", part))
	}
	if got := e.settled(3); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("after the second commit: %v, want %v", got, want)
	}
}
