// Package tcptransport carries multiraft batches between the nodes of a cluster over TCP,
// optionally inside mutual TLS: the production multiraft.Transport.
//
// It owns the node-to-node connections and everything on them: one outbound connection
// from this node to each peer (dialled lazily, on the first batch for it, and redialled with
// capped, jittered backoff), a bounded send queue per peer that drops and counts rather than
// block the host's Ready loop, the coalescing of every batch queued while a write was in
// flight into one write, the handshake that refuses a peer of another cluster or one that
// claims the wrong node id, the frame codec with its size limit and checksum, deadlines
// (a peer that stops reading cannot wedge the sender; a connection silent for longer than
// the idle timeout is closed), and the counters of what it did.
//
// Connections are one per ordered node pair: node A writes to B on the connection A
// dialled, and reads what B sends on the connection B dialled. Each connection then has one
// writer and one reader and no dial race to settle (two nodes dialling each other at once
// would otherwise have to agree which connection wins), reconnecting is the dialler's
// business alone, and a link that fails one way only shows to raft as exactly that.
// The cost is two sockets per node pair, nothing for clusters of tens of nodes.
//
// It must never interpret what it carries: no Raft logic (the host decides what to send,
// raft copes with loss, duplication and reordering), no broker, front-end or storage
// imports. It never blocks Send on the network and never panics on any input.
//
// # Wire format
//
// All integers big-endian. The dialler speaks first; the listener answers with a hello of
// its own carrying its verdict, and closes the connection unless it is Accepted:
//
//	hello:  "SLRT" | version u16 (1) | code u8 | n u8 | cluster id [n]byte (n ≤ 64)
//	        | from node u64 | to node u64 | CRC32C u32 of everything before it
//
// In the dialler's hello, code is 0, from is the dialler and to the node it means to reach;
// in the answer, from is the listener and to the dialler. Then, on a raft stream, the dialler
// sends frames until the connection ends; the listener sends nothing more:
//
//	frame:   payload length u32 (≤ MaxFrame) | CRC32C u32 of the payload | payload
//	payload: message*   (none: a liveness beat)
//	message: group id uvarint | flags u8 (bit 0: quiesce heartbeat) | n uvarint
//	         | raftpb.Message, protobuf-encoded [n]byte
//
// A frame's messages are one or more batches to the receiver, in the order they were sent;
// the receiver hands each frame to Host.Receive as one Batch whose From is the node the
// handshake named (a frame cannot claim another sender). An oversized, torn, corrupt or
// undecodable frame closes its connection with a log line; the dialler reconnects.
//
// A request stream (requests.go, multiraft.Requester) is a connection whose dialler's hello
// carries code 0x40: judged as above, then one request frame at a time from the dialler, each
// answered by one response frame from the listener:
//
//	request payload:  group id uvarint | request bytes
//	response payload: status u8 (0 ok, 1 error) | answer bytes, or the error's text
//
// A byte stream (streams.go, DialStream) is a connection whose dialler's hello carries code
// 0x80+kind: judged as above (NotServed if the listener takes no streams), then handed to
// the host as a plain connection; what flows on it is the host's (forwarded HTTP calls).
package tcptransport
