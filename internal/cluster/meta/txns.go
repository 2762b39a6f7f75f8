package meta

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Kafka transactions' coordinator state (docs/cluster.md, "Transactions"): the controller
// coordinates every transactional id, and each change of one id's state (the broker's
// encoding of package txn's record, opaque here) is one OpSetTxn entry, so that whichever
// node becomes controller holds every transaction and finishes what was prepared. The
// records are the catalog's (State.Txns), carried by its snapshots in versions 9 and 10,
// written only while some transactional id exists.
//
// Each record keeps the index of the entry that set it (a node's view of the records
// decodes again only those whose index moved).
//
// An entry names the Raft term of the coordinator that proposed it, and apply refuses it
// in any other term: a coordinator's memory is built after a barrier of its own term, so
// only its writes in that term follow from what the log holds. A write its node proposes
// after losing and regaining leadership (a later term) is refused rather than applied
// over what another controller wrote meanwhile.
//
// Upgrades: every node must run a build that knows OpSetTxn before a transactional
// producer is used in a cluster (an older replica stops on the entry).

// OpSetTxn sets one transactional id's record (empty: removes the id).
//
//	15 SetTxn  name(bytes) term(uvarint) record(bytes)
const OpSetTxn Op = 15

// Limits of a transaction record.
const (
	MaxTxnID     = 1 << 10 // a transactional id
	MaxTxnRecord = 4 << 20 // one id's record: its partitions and pending offsets
)

// ErrStaleTxnCoordinator: a transaction record proposed by a coordinator of another term
// than the entry's (it lost the leadership it built its state in).
var ErrStaleTxnCoordinator = errors.New("meta: transaction record of a coordinator of an earlier term")

// TxnRecord is one transactional id's state as the broker encoded it, and the index of the
// entry that set it.
type TxnRecord struct {
	Index  uint64
	Record []byte
}

// applyTxn sets or removes one transactional id's record; the map is replaced whole.
func (s *State) applyTxn(e uint64, term uint64, c *Command) Result {
	switch {
	case c.Term != term:
		return Result{Err: fmt.Errorf("%w: proposed in term %d, committed in %d", ErrStaleTxnCoordinator, c.Term, term)}
	case c.Name == "" || len(c.Name) > MaxTxnID:
		return Result{Err: fmt.Errorf("meta: invalid transactional id %q", c.Name)}
	}
	next := maps.Clone(s.Txns)
	if next == nil {
		next = map[string]TxnRecord{}
	}
	if len(c.Payload) == 0 {
		delete(next, c.Name)
	} else {
		next[c.Name] = TxnRecord{Index: e, Record: bytes.Clone(c.Payload)}
	}
	if len(next) == 0 {
		next = nil // as a snapshot without any restores it
	}
	s.Txns = next
	return Result{Index: e}
}

// encodeTxns appends the snapshot's transactions section:
//
//	n(uvarint) {id(bytes) index(uvarint) record(bytes)}...  by id
func (s *State) encodeTxns(b []byte) []byte {
	ids := slices.Sorted(maps.Keys(s.Txns))
	b = binary.AppendUvarint(b, uint64(len(ids)))
	for _, id := range ids {
		r := s.Txns[id]
		b = appendString(b, id)
		b = binary.AppendUvarint(b, r.Index)
		b = appendBytes(b, r.Record)
	}
	return b
}

// txns reads the section encodeTxns wrote: ids sorted, unique, legal; records not empty,
// set at or before the snapshot's index.
func (d *decoder) txns(s *State) {
	n := d.count()
	prev := ""
	for i := uint64(0); i < n && d.Err == nil; i++ {
		id := string(d.Bytes(MaxTxnID))
		index := d.Uvarint()
		rec := d.Bytes(MaxTxnRecord)
		if d.Err != nil {
			return
		}
		if id == "" || (i > 0 && id <= prev) || len(rec) == 0 || index == 0 || index > s.Index {
			d.Fail("transaction record %q at %d", id, index)
			return
		}
		if s.Txns == nil {
			s.Txns = map[string]TxnRecord{}
		}
		s.Txns[id] = TxnRecord{Index: index, Record: bytes.Clone(rec)}
		prev = id
	}
}

// PutTxn sets transactional id's record (empty: removes it) on behalf of the coordinator
// made ready in term, and returns the index it was applied at once applied here. Leader
// only (a follower answers *NotLeaderError, as ErrNotLeader): only the controller
// coordinates transactions. ErrStaleTxnCoordinator if the term moved on.
func (c *Catalog) PutTxn(ctx context.Context, term uint64, id string, record []byte) (uint64, error) {
	wait, err := c.PutTxnAsync(term, id, record)
	if err != nil {
		return 0, err
	}
	return wait(ctx)
}

// PutTxnAsync is PutTxn that returns once the entry is proposed: wait returns the index it
// was applied at once applied here (call it once). Entries proposed one after another are
// applied in that order, or a suffix of them not at all.
func (c *Catalog) PutTxnAsync(term uint64, id string, record []byte) (wait func(context.Context) (uint64, error), err error) {
	if id == "" || len(id) > MaxTxnID {
		return nil, fmt.Errorf("meta: invalid transactional id %q", id)
	}
	if len(record) > MaxTxnRecord {
		return nil, fmt.Errorf("meta: transaction record of %d bytes (max %d)", len(record), MaxTxnRecord)
	}
	w, err := c.doAsync(Command{Op: OpSetTxn, Name: id, Term: term, Payload: record})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (uint64, error) {
		r, err := w(ctx)
		return r.Index, err
	}, nil
}
