package multiraft

import (
	"bytes"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// FuzzEntryHeader: any entry data, normal or configuration change, decodes or is refused
// without panicking, and an encoded proposal decodes to what was encoded.
func FuzzEntryHeader(f *testing.F) {
	f.Add([]byte{}, uint64(1), uint64(7), false)
	f.Add(encodeProposal(3, 9, []byte("hello")), uint64(3), uint64(9), false)
	cc, _ := (&raftpb.ConfChangeV2{Context: encodeProposal(2, 5, nil)}).Marshal()
	f.Add(cc, uint64(2), uint64(5), true)
	f.Fuzz(func(t *testing.T, data []byte, node, seq uint64, conf bool) {
		typ := raftpb.EntryNormal
		if conf {
			typ = raftpb.EntryConfChangeV2
		}
		_, _, _ = entryHeader(raftpb.Entry{Type: typ, Data: data})
		n, s, d, ok := decodeProposal(encodeProposal(NodeID(node), seq, data))
		if !ok || n != NodeID(node) || s != seq || !bytes.Equal(d, data) {
			t.Fatalf("round trip: got %d %d %q %v", n, s, d, ok)
		}
	})
}
