// Package engine joins the multi-raft host to its durable storage: Engine makes a node's
// raftstore.Store the multiraft.Engine its Host runs on, so every group's log, HardState
// and snapshot live on disk and one Store.Sync per Ready round makes all the groups'
// writes of that round durable together.
//
// It owns the one mapping between the two (GroupID to a raftstore group id, a
// multiraft.Storage back to the *raftstore.Group it came from) and nothing else: no Raft
// logic (the host's), no bytes on disk (raftstore's).
//
// Why a package of its own: multiraft defines the Engine and Storage interfaces and must
// not depend on a concrete storage (it is tested on its in-memory MemEngine), and
// raftstore is storage beneath the host that decides no Raft logic, so it must not import
// the host either. deps_test.go keeps the two apart; this package, above both, is the only
// place they meet.
//
// It must never import internal/broker, a front-end, the server or the node.
package engine
