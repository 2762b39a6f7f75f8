package meta

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// txnCommands set, replace and remove transaction records, in applyAll's term 2.
func txnCommands() []Command {
	return []Command{
		{Op: OpSetTxn, Name: "etl", Term: 2, Payload: []byte("etl-1")},
		{Op: OpSetTxn, Name: "audit", Term: 2, Payload: []byte("audit-1")},
		{Op: OpSetTxn, Name: "etl", Term: 1, Payload: []byte("stale")}, // refused: another term
		{Op: OpSetTxn, Name: "", Term: 2, Payload: []byte("x")},        // refused
		{Op: OpSetTxn, Name: "etl", Term: 2, Payload: []byte("etl-2")},
		{Op: OpSetTxn, Name: "audit", Term: 2}, // removed
		{Op: OpSetTxn, Name: "gone", Term: 2},  // removing nothing
	}
}

// TestTxnRecordsApplyAndSnapshot: transaction records are set, replaced and removed by
// apply, each with its entry's index; a record proposed in another term than its entry's
// is refused; a snapshot at every point restores to the same state (the version before
// while no record exists, 9 once one does, 10 with pending offsets) and the rest applies
// on top.
func TestTxnRecordsApplyAndSnapshot(t *testing.T) {
	seed := append(seedCommands(), groupConfigCommands()[:1]...)
	cmds := append(seed, txnCommands()...)
	want := checkSnapshotCuts(t, cmds, len(seed), func(s *State) byte {
		if len(s.Txns) > 0 {
			return snapVersionTxns
		}
		return snapVersionConfigs
	})
	etlAt := uint64(len(seed) + 5) // the fifth txn command, 1-based indexes
	if len(want.Txns) != 1 || !bytes.Equal(want.Txns["etl"].Record, []byte("etl-2")) || want.Txns["etl"].Index != etlAt {
		t.Fatalf("records after the history: %+v", want.Txns)
	}
	pending := NewMachine(1)
	applyAll(t, pending, 1, append(cmds, Command{Op: OpGroupOffsets, Payload: []byte("offsets")}))
	snap, err := pending.Snapshot()
	if err != nil || snap[0] != snapVersionTxnsPending {
		t.Fatalf("snapshot with pending offsets and records: version %d, %v", snap[0], err)
	}
	restored := NewMachine(1)
	if err := restored.Restore(snap); err != nil || !reflect.DeepEqual(restored.State().Txns, want.Txns) {
		t.Fatalf("restore of version 10: %v, %+v", err, restored.State().Txns)
	}
}

// TestTxnRecordOfAnotherTermRefused: the result a proposer gets for a record of a stale
// term is ErrStaleTxnCoordinator, and the state is unchanged.
func TestTxnRecordOfAnotherTermRefused(t *testing.T) {
	m := NewMachine(1)
	applyAll(t, m, 1, seedCommands())
	at := uint64(len(seedCommands()) + 1)
	c := Command{Op: OpSetTxn, Origin: 1, Request: 77, Name: "etl", Term: 3, Payload: []byte("r")}
	if err := m.Apply([]multiraft.Entry{{Index: at, Term: 4, Data: c.Encode(nil)}}); err != nil {
		t.Fatal(err)
	}
	r, ok := m.take(at, 77)
	if !ok || !errors.Is(r.Err, ErrStaleTxnCoordinator) || m.State().Txns != nil {
		t.Fatalf("stale record: %+v %v, state %+v", r, ok, m.State().Txns)
	}
}

// TestTxnRecordsLeaveCatalogChanged: a transaction record moves the state's index, not
// CatalogChanged, which watchers of topics and queues key their rounds on.
func TestTxnRecordsLeaveCatalogChanged(t *testing.T) {
	m := NewMachine(1)
	applyAll(t, m, 1, seedCommands())
	before := m.State()
	if before.CatalogChanged != before.Index {
		t.Fatalf("after catalog entries: changed at %d, index %d", before.CatalogChanged, before.Index)
	}
	applyAll(t, m, before.Index+1, txnCommands())
	if after := m.State(); after.CatalogChanged != before.CatalogChanged || after.Index != before.Index+uint64(len(txnCommands())) {
		t.Fatalf("after transaction records: changed at %d (was %d), index %d", after.CatalogChanged, before.CatalogChanged, after.Index)
	}
}
