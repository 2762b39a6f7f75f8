package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	pb "go.etcd.io/raft/v3/raftpb"
)

// The two small files of a group. Each is replaced whole with
// vfs.WriteFileAtomic, so after a crash it holds its old or its new bytes;
// the CRC catches what atomic replacement cannot (bit rot, a bad sector).
//
//	state:    | "SLRS" | version 1 | term 8 | vote 8 | commit 8 | hsSeq 8 | first 8 | prevTerm 8 | snapIndex 8 |
//	          | confStateLen 4 | ConfState (protobuf) | crc32c 4 |
//	snapshot: | "SLRN" | version 1 | index 8 | term 8 | confStateLen 4 | ConfState |
//	          | dataLen 8 | data | crc32c 4 |
//
// Integers are big-endian; the CRC-32C (Castagnoli) covers every byte
// before it. state's snapIndex is the snapshot its ConfState was current
// at: a state file older than the snapshot file (a crash between the two
// writes) yields to the snapshot's ConfState. hsSeq orders its HardState
// against the node's HardState log (hswal.go).
const (
	stateFile    = "state"
	snapshotFile = "snapshot"
	fileVersion  = 1
)

var (
	stateMagic = [4]byte{'S', 'L', 'R', 'S'}
	snapMagic  = [4]byte{'S', 'L', 'R', 'N'}
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

// ErrFileDamaged: a state or snapshot file fails its checksum or framing.
var ErrFileDamaged = errors.New("raftstore: damaged file")

// stateRec is what the state file holds.
type stateRec struct {
	hs        pb.HardState
	hsSeq     uint64 // the HardState log's sequence number of hs
	cs        pb.ConfState
	first     uint64 // the first index Entries serves (compaction point + 1); 0: not set
	prevTerm  uint64 // the term of entry first-1, which Term must answer
	snapIndex uint64 // the snapshot cs was current at
}

func encodeState(r stateRec) ([]byte, error) {
	cs, err := r.cs.Marshal()
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, 5+56+4+len(cs)+4)
	b = append(b, stateMagic[:]...)
	b = append(b, fileVersion)
	for _, v := range []uint64{r.hs.Term, r.hs.Vote, r.hs.Commit, r.hsSeq, r.first, r.prevTerm, r.snapIndex} {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(cs)))
	b = append(b, cs...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

func decodeState(b []byte) (stateRec, error) {
	body, err := checkFrame(b, stateMagic, 56+4)
	if err != nil {
		return stateRec{}, fmt.Errorf("state: %w", err)
	}
	be := binary.BigEndian
	r := stateRec{
		hs:        pb.HardState{Term: be.Uint64(body), Vote: be.Uint64(body[8:]), Commit: be.Uint64(body[16:])},
		hsSeq:     be.Uint64(body[24:]),
		first:     be.Uint64(body[32:]),
		prevTerm:  be.Uint64(body[40:]),
		snapIndex: be.Uint64(body[48:]),
	}
	cs, rest, err := lengthPrefixed(body[56:], 4)
	if err != nil || len(rest) != 0 {
		return stateRec{}, fmt.Errorf("state: %w: ConfState length", ErrFileDamaged)
	}
	if err := r.cs.Unmarshal(cs); err != nil {
		return stateRec{}, fmt.Errorf("state: %w: ConfState: %v", ErrFileDamaged, err)
	}
	return r, nil
}

func encodeSnapshot(s pb.Snapshot) ([]byte, error) {
	cs, err := s.Metadata.ConfState.Marshal()
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, 5+16+4+len(cs)+8+len(s.Data)+4)
	b = append(b, snapMagic[:]...)
	b = append(b, fileVersion)
	b = binary.BigEndian.AppendUint64(b, s.Metadata.Index)
	b = binary.BigEndian.AppendUint64(b, s.Metadata.Term)
	b = binary.BigEndian.AppendUint32(b, uint32(len(cs)))
	b = append(b, cs...)
	b = binary.BigEndian.AppendUint64(b, uint64(len(s.Data)))
	b = append(b, s.Data...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

// decodeSnapshot returns the snapshot b holds; its Data aliases b.
func decodeSnapshot(b []byte) (pb.Snapshot, error) {
	body, err := checkFrame(b, snapMagic, 16+4+8)
	if err != nil {
		return pb.Snapshot{}, fmt.Errorf("snapshot: %w", err)
	}
	var s pb.Snapshot
	s.Metadata.Index = binary.BigEndian.Uint64(body)
	s.Metadata.Term = binary.BigEndian.Uint64(body[8:])
	cs, rest, err := lengthPrefixed(body[16:], 4)
	if err != nil {
		return pb.Snapshot{}, fmt.Errorf("snapshot: %w: ConfState length", ErrFileDamaged)
	}
	if err := s.Metadata.ConfState.Unmarshal(cs); err != nil {
		return pb.Snapshot{}, fmt.Errorf("snapshot: %w: ConfState: %v", ErrFileDamaged, err)
	}
	data, rest, err := lengthPrefixed(rest, 8)
	if err != nil || len(rest) != 0 {
		return pb.Snapshot{}, fmt.Errorf("snapshot: %w: data length", ErrFileDamaged)
	}
	if len(data) > 0 {
		s.Data = data
	}
	return s, nil
}

// checkFrame checks magic, version and CRC and returns the bytes between
// the version and the CRC, which must be at least min long.
func checkFrame(b []byte, magic [4]byte, min int) ([]byte, error) {
	if len(b) < 5+min+4 {
		return nil, fmt.Errorf("%w: %d bytes", ErrFileDamaged, len(b))
	}
	end := len(b) - 4
	if got, want := crc32.Checksum(b[:end], castagnoli), binary.BigEndian.Uint32(b[end:]); got != want {
		return nil, fmt.Errorf("%w: crc %08x, computed %08x", ErrFileDamaged, want, got)
	}
	if [4]byte(b[:4]) != magic || b[4] != fileVersion {
		return nil, fmt.Errorf("%w: magic %q version %d", ErrFileDamaged, b[:4], b[4])
	}
	return b[5:end], nil
}

// lengthPrefixed splits a size-byte big-endian length and that many bytes
// off the front of b.
func lengthPrefixed(b []byte, size int) (v, rest []byte, err error) {
	if len(b) < size {
		return nil, nil, ErrFileDamaged
	}
	var n uint64
	if size == 4 {
		n = uint64(binary.BigEndian.Uint32(b))
	} else {
		n = binary.BigEndian.Uint64(b)
	}
	b = b[size:]
	if n > uint64(len(b)) {
		return nil, nil, ErrFileDamaged
	}
	return b[:n], b[n:], nil
}
