package raftstore

import (
	"bytes"
	"reflect"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
)

// FuzzDecodeState: no input panics the decoder, and whatever it accepts
// encodes back to the same bytes (the format has one encoding per value).
func FuzzDecodeState(f *testing.F) {
	for _, r := range []stateRec{
		{},
		{hs: pb.HardState{Term: 5, Vote: 2, Commit: 9}, first: 4, prevTerm: 3, snapIndex: 3,
			cs: pb.ConfState{Voters: []uint64{1, 2, 3}, Learners: []uint64{4}, VotersOutgoing: []uint64{1}, AutoLeave: true}},
	} {
		b, err := encodeState(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeState(b)
		if err != nil {
			return
		}
		again, err := encodeState(r)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := decodeState(again)
		if err != nil || !reflect.DeepEqual(r, r2) {
			t.Fatalf("round trip: %+v then %+v, %v", r, r2, err)
		}
	})
}

// FuzzDecodeSnapshot: as FuzzDecodeState, for the snapshot file.
func FuzzDecodeSnapshot(f *testing.F) {
	for _, s := range []pb.Snapshot{
		{},
		{Data: []byte("state machine"), Metadata: pb.SnapshotMetadata{Index: 9, Term: 3, ConfState: pb.ConfState{Voters: []uint64{1, 2}}}},
	} {
		b, err := encodeSnapshot(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeSnapshot(b)
		if err != nil {
			return
		}
		again, err := encodeSnapshot(s)
		if err != nil {
			t.Fatal(err)
		}
		s2, err := decodeSnapshot(again)
		if err != nil || !reflect.DeepEqual(s.Metadata, s2.Metadata) || !bytes.Equal(s.Data, s2.Data) {
			t.Fatalf("round trip: %+v then %+v, %v", s.Metadata, s2.Metadata, err)
		}
	})
}

// FuzzDecodeEntry: no batch bytes panic the entry decoder.
func FuzzDecodeEntry(f *testing.F) {
	for _, e := range []pb.Entry{{Index: 3, Term: 2, Data: []byte("x")}, {Index: 1, Term: 1, Type: pb.EntryConfChangeV2}} {
		b, err := encodeEntry(e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, e.Index)
	}
	f.Fuzz(func(t *testing.T, b []byte, want uint64) {
		e, err := decodeEntry(b, want)
		if err == nil && e.Index != want {
			t.Fatalf("decoded index %d, want %d", e.Index, want)
		}
	})
}

// FuzzDecodeWAL: no bytes panic the HardState log's decoder, and what it
// accepts is a prefix of the input that encodes back to the same bytes.
func FuzzDecodeWAL(f *testing.F) {
	var b []byte
	for _, r := range []walRec{{group: 1, seq: 1, hs: pb.HardState{Term: 2, Vote: 1, Commit: 3}}, {group: 9, seq: 2}} {
		b = r.append(b)
	}
	f.Add(b)
	f.Add(b[:len(b)-3])
	f.Fuzz(func(t *testing.T, b []byte) {
		var again []byte
		for _, r := range decodeWAL(b) {
			again = r.append(again)
		}
		if !bytes.HasPrefix(b, again) {
			t.Fatalf("decoded records do not encode back to a prefix of the input")
		}
	})
}
