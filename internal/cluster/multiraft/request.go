package multiraft

import (
	"context"
	"errors"
	"fmt"
)

// Requests are a second, small channel between the replicas of a group, outside Raft: one
// node asks a peer's state machine for something and waits for its answer. A replicated
// partition uses it to pull the records a snapshot's checkpoint names from a replica that
// holds them (the Raft snapshot stays a checkpoint; the records travel here, in chunks).
// Raft never sees a request, and nothing a request does may change replicated state
// directly: the answering state machine reads, or proposes an entry in its group as any
// client would (a replicated queue takes a peer's dead-letter copies so) and answers once
// it is committed.

// Requester is an optional interface of a Transport that carries requests: Request sends
// req to group's state machine on node to and returns its answer. An error the peer's
// state machine (or host) returned is a *RemoteError; anything else is the transport's.
type Requester interface {
	Request(ctx context.Context, to NodeID, group GroupID, req []byte) ([]byte, error)
}

// RequestServer is an optional interface of a StateMachine that answers requests. Unlike
// the rest of StateMachine it is called from the transport's goroutines, concurrently with
// the Ready loop and with other requests: it must only read (or propose), and be safe for
// that.
type RequestServer interface {
	ServeRequest(from NodeID, req []byte) ([]byte, error)
}

// RequestHandler is what a transport hands arriving requests to: a Host.
type RequestHandler interface {
	HandleRequest(from NodeID, group GroupID, req []byte) ([]byte, error)
}

// ErrNoRequests: the host's transport does not carry requests, or the group's state
// machine on the asked node does not answer them.
var ErrNoRequests = errors.New("multiraft: requests not served")

// RemoteError is the error a peer answered a request with (its text: errors do not cross
// the wire as values).
type RemoteError struct {
	Node NodeID
	Msg  string
}

func (e *RemoteError) Error() string { return fmt.Sprintf("node %d answered: %s", e.Node, e.Msg) }

var _ RequestHandler = (*Host)(nil)

// Request asks group's state machine on node to, through the host's transport. It never
// touches the Ready loop: a state machine may call it from Restore.
func (h *Host) Request(ctx context.Context, to NodeID, group GroupID, req []byte) ([]byte, error) {
	r, ok := h.cfg.Transport.(Requester)
	if !ok {
		return nil, fmt.Errorf("%w: the transport carries none", ErrNoRequests)
	}
	if to == h.cfg.Node {
		return nil, fmt.Errorf("multiraft: request to this node itself")
	}
	return r.Request(ctx, to, group, req)
}

// HandleRequest answers a peer's request with group's state machine here (ErrGroupUnknown
// if it is not hosted, ErrNoRequests if it serves none). It holds no host lock while the
// state machine answers.
func (h *Host) HandleRequest(from NodeID, group GroupID, req []byte) ([]byte, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrStopped
	}
	g := h.groups[group]
	h.mu.Unlock()
	if g == nil {
		return nil, fmt.Errorf("%w: group %d", ErrGroupUnknown, group)
	}
	rs, ok := g.sm.(RequestServer)
	if !ok {
		return nil, fmt.Errorf("%w: group %d's state machine answers none", ErrNoRequests, group)
	}
	return rs.ServeRequest(from, req)
}

// SnapshotCapturer is an optional interface of a StateMachine whose snapshot is long to
// encode (a queue's snapshot holds its whole backlog). The host calls CaptureSnapshot in
// the Ready loop in place of Snapshot: it takes what the snapshot needs as of the last
// applied entry, quickly (sharing what later applies never change), and returns the
// function that encodes it, which the host runs on a goroutine of its own while every
// group goes on, and stores the snapshot at the captured index in a later round. encode
// must not touch the state machine. A configuration change's snapshot is still taken at
// once, by Snapshot.
type SnapshotCapturer interface {
	CaptureSnapshot() (encode func() ([]byte, error), err error)
}

// SnapshotPacer is an optional interface of a StateMachine whose snapshot grows with its
// state, as a replicated queue's does with its backlog (every unfinished message's body):
// taken every SnapshotEntries whatever its size, a 1 GiB snapshot after each 10,000
// entries of 1 KiB writes a hundred times the bytes the entries did and holds the Ready
// loop (every group of the node) for a second each time. Once SnapshotEntries entries were
// applied since the last snapshot, the host takes the next only when SnapshotDue says so
// (a configuration change still forces one). Called from the Ready loop.
type SnapshotPacer interface {
	SnapshotDue() bool
}

// SnapshotWanter is an optional interface of a StateMachine that decides its own snapshot
// and compaction pace, for a replicated partition whose entries are large: counted in
// entries alone (SnapshotEntries, and half of it kept behind each snapshot) its Raft log
// could hold gigabytes. Both are called from the Ready loop.
type SnapshotWanter interface {
	// WantSnapshot, asked after each apply, takes a snapshot before SnapshotEntries
	// entries (say, every so many bytes applied).
	WantSnapshot() bool
	// CompactTo is where the log is compacted to after the snapshot at index snap was
	// taken (instead of half SnapshotEntries behind it); never past snap, nor past
	// CompactLimit if the machine is also a CompactionLimiter. Not called for the
	// snapshot a configuration change forces (which compacts nothing).
	CompactTo(snap uint64) uint64
}
