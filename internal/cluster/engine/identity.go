package engine

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/raftstore"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// identityFile names the node a Raft directory belongs to, and its incarnation.
const identityFile = "identity"

// ErrStateLost: the node was a member (Options.Member) but its Raft directory is empty or
// has lost its identity: the disk was wiped or replaced. Starting it would make its
// replicas come back empty under their old IDs (multiraft's voting.go says what that
// risks). Remove the node from its groups and add it back, or start it as a new node.
var ErrStateLost = errors.New("engine: this node's Raft state is gone (a wiped or replaced disk)")

// ErrWrongNode: the Raft directory belongs to another node.
var ErrWrongNode = errors.New("engine: the Raft directory belongs to another node")

// Options open a node's engine.
type Options struct {
	Store raftstore.Options // the Raft directory (Store.Dir) and its file system
	Node  multiraft.NodeID  // the node the directory must belong to; never 0
	// Member says this node was a member of the cluster before: the operator's word (as
	// etcd's --initial-cluster-state=existing) or the catalog's. Its directory must then
	// hold its identity; an empty one is ErrStateLost, never a silent fresh start.
	Member bool
}

// identity is the content of the identity file: | "SLID" | version 1 | node 8 |
// incarnation 8 | crc32c 4 |, big-endian, replaced atomically (written once).
type identity struct {
	node        multiraft.NodeID
	incarnation uint64
}

const identitySize = 4 + 1 + 8 + 8 + 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (id identity) encode() []byte {
	b := make([]byte, 0, identitySize)
	b = append(b, "SLID"...)
	b = append(b, 1)
	b = binary.BigEndian.AppendUint64(b, uint64(id.node))
	b = binary.BigEndian.AppendUint64(b, id.incarnation)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeIdentity(b []byte) (identity, error) {
	if len(b) != identitySize || string(b[:4]) != "SLID" || b[4] != 1 ||
		binary.BigEndian.Uint32(b[identitySize-4:]) != crc32.Checksum(b[:identitySize-4], castagnoli) {
		return identity{}, fmt.Errorf("engine: %s: damaged or of an unknown version", identityFile)
	}
	return identity{node: multiraft.NodeID(binary.BigEndian.Uint64(b[5:])), incarnation: binary.BigEndian.Uint64(b[13:])}, nil
}

// loadIdentity reads the directory's identity, or creates it for a new node. It reports
// whether it created it.
func loadIdentity(o Options) (identity, bool, error) {
	fsys, dir := o.Store.FS, o.Store.Dir
	b, err := vfs.ReadFile(fsys, filepath.Join(dir, identityFile))
	switch {
	case err == nil:
		id, err := decodeIdentity(b)
		if err != nil {
			return id, false, err
		}
		if id.node != o.Node {
			return id, false, fmt.Errorf("%w: %s is node %d's, not node %d's", ErrWrongNode, dir, id.node, o.Node)
		}
		return id, false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return identity{}, false, fmt.Errorf("engine: read %s: %w", identityFile, err)
	case o.Member:
		return identity{}, false, fmt.Errorf("%w: node %d, %s holds no identity", ErrStateLost, o.Node, dir)
	}
	if names, err := fsys.List(dir); err == nil && len(names) > 0 {
		// Raft state without the identity that every created directory gets first.
		return identity{}, false, fmt.Errorf("%w: %s holds %d entries but no identity", ErrStateLost, dir, len(names))
	}
	var r [8]byte
	_, _ = rand.Read(r[:]) // crypto/rand.Read never fails (Go 1.24)
	id := identity{node: o.Node, incarnation: binary.BigEndian.Uint64(r[:]) | 1}
	if err := vfs.MkdirAllDurable(fsys, dir); err != nil {
		return id, false, fmt.Errorf("engine: create %s: %w", dir, err)
	}
	if err := vfs.WriteFileAtomic(fsys, dir, identityFile, id.encode()); err != nil {
		return id, false, fmt.Errorf("engine: write %s: %w", identityFile, err)
	}
	return id, true, nil
}
