// Package meta is the cluster's catalog: the state machine of the metadata Raft group
// (Group, id 1), replicated on every node, and a small client API (Catalog) over a
// multiraft.Host whose calls return after commit with the result apply computed.
//
// It owns the registered nodes (their advertised addresses), the topics (name, cluster-wide
// topic id, the broker's opaque settings) and every partition's placement: its data Raft
// group id and its replicas. Placement and ids are computed in apply from the committed
// state and the entry alone, so every replica computes the same catalog; a restored
// snapshot plus the log tail gives what applying every entry gives. The node glue
// (internal/node) watches State/Changed and creates the broker topics and partition groups
// a node must host; this package creates nothing itself.
//
// It also carries consumer-group offset changes (OpGroupOffsets, groupoffsets.go): bytes
// it never reads, handed in log order to the hook the broker registers on every node. They
// are not part of State. From feature level 3 every snapshot carries the hook's whole group
// state, which a node restoring it takes in place of its own, and the log is compacted
// behind it; below it, once they flow, the metadata log is never compacted (groupstate.go).
//
// And Kafka transactions' coordinator records (OpSetTxn, txns.go): the broker's encoding of
// one transactional id's state, opaque here, kept in State.Txns and its snapshot, each
// with the index that set it, and refused at apply when proposed in another term than the
// entry's (a deposed coordinator's write).
//
// It must never import the broker, a front-end, the server or the node (deps_test.go),
// read a clock or a random source in apply, interpret a topic's settings, a group-offsets
// payload or a transaction record, or mutate a State it has handed out: a State is an immutable value, replaced
// whole on every change.
// See docs/cluster.md, "Catalog".
package meta
