package broker

import (
	"errors"
	"testing"

	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/txn"
)

// TestVerifyInView: a partition leader admits a transactional batch only on a view of the
// records where the producer's transaction is Ongoing with the partition, at its epoch,
// and not older than the last marker of the producer it applied or was asked to write; a
// lower epoch is refused for good (fenced), the rest may be a view that lags and is
// checked again.
func TestVerifyInView(t *testing.T) {
	const pid = 7
	// rec is the producer's record at Seq seq (the decisions so far), Ongoing with out/0.
	rec := func(seq uint32) *txn.Txn {
		return &txn.Txn{ID: "etl", ProducerID: pid, Epoch: 3, State: txn.Ongoing, Seq: seq,
			Partitions: []txn.Partition{{Topic: "out", Partition: 0}}}
	}
	other := rec(5)
	other.Partitions = []txn.Partition{{Topic: "out", Partition: 1}}
	done := rec(5)
	done.State, done.Partitions = txn.CompleteCommit, nil
	for _, c := range []struct {
		name      string
		rec       *txn.Txn
		epoch     int16
		seq, end  int32 // the partition's last marker applied, asked (0: none)
		want      error
		wantFinal bool
	}{
		{name: "ongoing with the partition", rec: rec(5), epoch: 3},
		{name: "the transaction after the last marker", rec: rec(5), epoch: 3, seq: 5, end: 4},
		{name: "no record", epoch: 3, want: ErrInvalidPIDMapping},
		{name: "older epoch: fenced", rec: rec(5), epoch: 2, want: ErrTxnFenced, wantFinal: true},
		{name: "newer epoch: this view lags", rec: rec(5), epoch: 4, want: ErrInvalidTxnState},
		{name: "partition not added", rec: other, epoch: 3, want: ErrInvalidTxnState},
		{name: "transaction complete", rec: done, epoch: 3, want: ErrInvalidTxnState},
		{name: "a marker applied since this view", rec: rec(4), epoch: 3, seq: 5, want: ErrInvalidTxnState},
		{name: "a marker asked for since this view", rec: rec(5), epoch: 3, seq: 5, end: 6, want: ErrInvalidTxnState},
		{name: "sequences wrapped", rec: rec(1), epoch: 3, seq: -1},
		{name: "sequences wrapped, view behind", rec: rec(1<<32 - 2), epoch: 3, seq: 1, want: ErrInvalidTxnState},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := &txnView{byPID: map[int64]txnViewEntry{}}
			if c.rec != nil {
				v.byPID[pid] = txnViewEntry{index: 50, t: c.rec}
			}
			p := &partitionRT{topic: "out", index: 0}
			if c.seq != 0 {
				p.txn.seq = map[int64]lastMarker{pid: {seq: c.seq}}
			}
			if c.end > 0 {
				p.txn.ending = map[int64]int32{pid: c.end}
			}
			h := batch.Header{ProducerID: pid, ProducerEpoch: c.epoch}
			err, final := verifyInView(v, p, h)
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) || final != c.wantFinal {
				t.Fatalf("err %v final %v, want %v final %v", err, final, c.want, c.wantFinal)
			}
		})
	}
}
