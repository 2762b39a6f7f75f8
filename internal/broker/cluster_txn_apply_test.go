package broker

import (
	"testing"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// TestReplicaStaleMarkerIgnored is the hazard of markers written by partition leaders: a
// leader acting on an old view (a deposed controller still finishing a transaction it
// prepared, a request delayed in the network) proposes the marker of a transaction that
// ended already, after the same producer's next transaction wrote here. Applied, it would
// end that transaction with the wrong decision (its records committed, or dropped, before
// the producer decided). Every replica must ignore, at apply, a marker whose sequence is
// not above the last it applied for the producer; and derive that last sequence from its
// log again after a restart.
func TestReplicaStaleMarkerIgnored(t *testing.T) {
	fsys := vfs.NewMem()
	_, r := openReplicaLog(t, fsys)
	p := r.p
	pid := ProducerID{ID: 7 << clusterPIDShift, Epoch: 0}
	marker := func(commit bool, seq int32) []byte {
		raw, err := batch.BuildMarker(pid.ID, pid.Epoch, commit, seq, 1)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	steps := []struct {
		name    string
		raw     []byte
		restart bool // rebuild the replica's state from its log first (Restore)
		snap    bool // and from its transaction snapshot
		hw, lso int64
		aborted []AbortedTxn
	}{
		{name: "txn 1 writes", raw: txnBatch(pid, 0, "a"), hw: 1, lso: 0},
		{name: "txn 1 commits (seq 100)", raw: marker(true, 100), hw: 2, lso: 2},
		{name: "txn 2 writes", raw: txnBatch(pid, 1, "b"), hw: 3, lso: 2},
		{name: "txn 1's commit again, from a stale leader", raw: marker(true, 100), hw: 3, lso: 2},
		{name: "an older marker still", raw: marker(false, 90), hw: 3, lso: 2},
		{name: "after a restart, txn 1's commit again", raw: marker(true, 100), restart: true, hw: 3, lso: 2},
		{name: "txn 2 aborts (seq 130)", raw: marker(false, 130), hw: 4, lso: 4,
			aborted: []AbortedTxn{{ProducerID: pid.ID, FirstOffset: 2, LastOffset: 3}}},
		{name: "txn 2's abort again", raw: marker(false, 130), restart: true, snap: true, hw: 4, lso: 4,
			aborted: []AbortedTxn{{ProducerID: pid.ID, FirstOffset: 2, LastOffset: 3}}},
	}
	for _, s := range steps {
		if s.snap {
			if err := p.txn.maybeSnapshot(p.log, fsys, p.dir, true); err != nil {
				t.Fatal(err)
			}
		}
		if s.restart {
			cp, err := r.Checkpoint()
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Restore(cp); err != nil {
				t.Fatal(err)
			}
		}
		res, err := r.Apply(3, [][]byte{s.raw})
		if err != nil || res[0].Err != nil {
			t.Fatalf("%s: %+v, %v", s.name, res, err)
		}
		st := partitionState(p)
		got := p.txn.abortedIn(0, st.HighWatermark)
		if st.HighWatermark != s.hw || st.LastStableOffset != s.lso || len(got) != len(s.aborted) ||
			len(got) > 0 && got[0] != s.aborted[0] {
			t.Fatalf("%s: high watermark %d, last stable %d, aborted %+v; want %d, %d, %+v",
				s.name, st.HighWatermark, st.LastStableOffset, got, s.hw, s.lso, s.aborted)
		}
	}
}
