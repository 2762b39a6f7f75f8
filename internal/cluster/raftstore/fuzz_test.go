package raftstore

import (
	"bytes"
	"reflect"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
)

// FuzzDecodeFiles feeds arbitrary bytes to the decoder of each file the
// store reads back (one target for the three, to keep CI's fuzz budget):
// the first byte picks state, snapshot or the HardState log. No input may
// panic, and what a decoder accepts must encode back to the same value
// (state, snapshot) or to a prefix of the input (the HardState log).
func FuzzDecodeFiles(f *testing.F) {
	st, err := encodeState(stateRec{hs: pb.HardState{Term: 5, Vote: 2, Commit: 9}, hsSeq: 7, first: 4, prevTerm: 3, snapIndex: 3,
		cs: pb.ConfState{Voters: []uint64{1, 2, 3}, Learners: []uint64{4}, VotersOutgoing: []uint64{1}, AutoLeave: true}})
	if err != nil {
		f.Fatal(err)
	}
	sn, err := encodeSnapshot(pb.Snapshot{Data: []byte("state machine"),
		Metadata: pb.SnapshotMetadata{Index: 9, Term: 3, ConfState: pb.ConfState{Voters: []uint64{1, 2}}}})
	if err != nil {
		f.Fatal(err)
	}
	var wal []byte
	for _, r := range []walRec{{group: 1, seq: 1, hs: pb.HardState{Term: 2, Vote: 1, Commit: 3}}, {group: 9, seq: 2}} {
		wal = r.append(wal)
	}
	f.Add(append([]byte{0}, st...))
	f.Add(append([]byte{1}, sn...))
	f.Add(append([]byte{2}, wal...))
	f.Add(append([]byte{2}, wal[:len(wal)-3]...))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		switch kind, b := b[0]%3, b[1:]; kind {
		case 0:
			fuzzState(t, b)
		case 1:
			fuzzSnapshot(t, b)
		default:
			var again []byte
			for _, r := range decodeWAL(b) {
				again = r.append(again)
			}
			if !bytes.HasPrefix(b, again) {
				t.Fatalf("decoded records do not encode back to a prefix of the input")
			}
		}
	})
}

func fuzzState(t *testing.T, b []byte) {
	r, err := decodeState(b)
	if err != nil {
		return
	}
	again, err := encodeState(r)
	if err != nil {
		t.Fatal(err)
	}
	if r2, err := decodeState(again); err != nil || !reflect.DeepEqual(r, r2) {
		t.Fatalf("round trip: %+v then %+v, %v", r, r2, err)
	}
}

func fuzzSnapshot(t *testing.T, b []byte) {
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
}

// FuzzDecodeEntry: no batch bytes panic the entry decoder, and an entry
// it accepts sits at the index asked for.
func FuzzDecodeEntry(f *testing.F) {
	for _, e := range []pb.Entry{{Index: 3, Term: 2, Data: []byte("x")}, {Index: 1, Term: 1, Type: pb.EntryConfChangeV2}} {
		b, err := appendEntry(nil, e)
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
