package broker

import (
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/cluster/replpart"
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

// TestReplicaTrimExpiresAbortedTxns: a trim (retention or DeleteRecords in a cluster)
// forgets the aborted transactions wholly below the new log start, as a single node's
// retention does; otherwise a replicated partition's aborted index, and every transaction
// snapshot written from it, grows with every abort for the partition's whole life.
func TestReplicaTrimExpiresAbortedTxns(t *testing.T) {
	fsys := vfs.NewMem()
	_, r := openReplicaLog(t, fsys)
	p := r.p
	pid := ProducerID{ID: 7 << clusterPIDShift, Epoch: 0}
	for i, seq := range []int32{10, 11, 12} { // three aborted transactions: offsets 0-1, 2-3, 4-5
		abort, err := batch.BuildMarker(pid.ID, pid.Epoch, false, seq, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range [][]byte{txnBatch(pid, int32(i), "x"), abort} {
			if res, err := r.Apply(3, [][]byte{raw}); err != nil || res[0].Err != nil {
				t.Fatalf("apply: %+v, %v", res, err)
			}
		}
	}
	if got := len(p.txn.abortedIn(0, 6)); got != 3 {
		t.Fatalf("%d aborted transactions before the trim, want 3", got)
	}
	if _, err := r.Trim(4); err != nil { // the first two wholly below
		t.Fatal(err)
	}
	p.txn.mu.Lock()
	kept := append([]AbortedTxn(nil), p.txn.aborted...)
	p.txn.mu.Unlock()
	if want := (AbortedTxn{ProducerID: pid.ID, FirstOffset: 4, LastOffset: 5}); len(kept) != 1 || kept[0] != want {
		t.Fatalf("aborted index after a trim to 4: %+v, want only %+v", kept, want)
	}
}

// markerApplier applies single-batch entries to r, checking whether each is a duplicate.
type markerApplier struct {
	t *testing.T
	r *replicaLog
}

// marker is a commit marker of pid with sequence seq at time ts (unix ms).
func (a markerApplier) marker(pid ProducerID, seq int32, ts int64) []byte {
	raw, err := batch.BuildMarker(pid.ID, pid.Epoch, true, seq, ts)
	if err != nil {
		a.t.Fatal(err)
	}
	return raw
}

func (a markerApplier) apply(what string, raw []byte, dup bool) {
	a.t.Helper()
	res, err := a.r.Apply(3, [][]byte{raw})
	if err != nil || res[0].Err != nil || res[0].Duplicate != dup {
		a.t.Fatalf("%s: %+v, %v; want duplicate %v", what, res, err, dup)
	}
}

// TestReplicaTrimForgetsOldMarkers: a producer's last marker is remembered to refuse the
// same marker repeated (a stale one, which could end the producer's next transaction),
// but not forever: a trim forgets those below the new log start that are more than
// markerMemory older than the newest marker applied, and a marker of that producer is
// then applied whatever its sequence. One still in the log, or recent, is kept.
func TestReplicaTrimForgetsOldMarkers(t *testing.T) {
	_, r := openReplicaLog(t, vfs.NewMem())
	hour := time.Hour.Milliseconds()
	old, recent, inLog := ProducerID{ID: 7 << clusterPIDShift}, ProducerID{ID: 8 << clusterPIDShift}, ProducerID{ID: 9 << clusterPIDShift}
	a := markerApplier{t, r}
	marker, apply := a.marker, a.apply
	apply("old's transaction", txnBatch(old, 0, "o"), false)
	apply("old's marker, at hour 0", marker(old, 4, 0), false)            // offset 1
	apply("recent's transaction", txnBatch(recent, 0, "r"), false)        // 2
	apply("recent's marker, at hour 2", marker(recent, 4, 2*hour), false) // 3
	apply("inLog's transaction", txnBatch(inLog, 0, "i"), false)          // 4
	apply("inLog's marker, at hour 0", marker(inLog, 4, 0), false)        // 5
	if _, err := r.Trim(4); err != nil {
		t.Fatal(err)
	}
	apply("old's marker again: forgotten", marker(old, 4, 3*hour), false)
	apply("recent's marker again: below the start, but within the hour", marker(recent, 4, 3*hour), true)
	apply("inLog's marker again: still in the log", marker(inLog, 4, 3*hour), true)
}

// TestReplicaForgetEntryForgetsOldMarkers: a forget entry forgets, with a transactional
// producer, its last marker once that is more than an hour older than the newest marker
// applied here (a partition no trim passes would otherwise remember every transactional
// producer for good); a recent marker is kept, and so is the marker of a producer the
// entry does not forget (it wrote after the leader listed it).
func TestReplicaForgetEntryForgetsOldMarkers(t *testing.T) {
	_, r := openReplicaLog(t, vfs.NewMem())
	hour := time.Hour.Milliseconds()
	old, recent, busy := ProducerID{ID: 7 << clusterPIDShift}, ProducerID{ID: 8 << clusterPIDShift}, ProducerID{ID: 9 << clusterPIDShift}
	a := markerApplier{t, r}
	marker, apply := a.marker, a.apply
	apply("old's transaction", txnBatch(old, 0, "o"), false)              // offset 0
	apply("old's marker, at hour 0", marker(old, 4, 0), false)            // 1
	apply("busy's transaction", txnBatch(busy, 0, "b"), false)            // 2
	apply("busy's marker, at hour 0", marker(busy, 4, 0), false)          // 3
	apply("recent's transaction", txnBatch(recent, 0, "r"), false)        // 4
	apply("recent's marker, at hour 2", marker(recent, 4, 2*hour), false) // 5
	if err := r.ForgetProducers([]replpart.IdleProducer{{ID: old.ID, LastBase: 0}, {ID: recent.ID, LastBase: 4},
		{ID: busy.ID, LastBase: 1}}); err != nil { // busy's last batch is at 2 now
		t.Fatal(err)
	}
	if got := r.p.prod.Producers(); len(got) != 1 || got[0].ID != busy.ID {
		t.Fatalf("producers after the entry: %+v, want busy's alone", got)
	}
	apply("old's marker again: forgotten", marker(old, 4, 3*hour), false)
	apply("recent's marker again: within the hour", marker(recent, 4, 3*hour), true)
	apply("busy's marker again: its producer kept", marker(busy, 4, 3*hour), true)
}
