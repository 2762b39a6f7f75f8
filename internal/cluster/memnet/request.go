package memnet

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// ErrUnreachable: a request to a node that is detached, or across a cut link (either way:
// a request needs its answer back).
var ErrUnreachable = errors.New("memnet: node unreachable")

// RequestHook, when set, is asked about every request before it is delivered: an error
// fails the request with it (a peer that dies mid-pull, a slow one timing out).
type RequestHook func(from, to multiraft.NodeID, group multiraft.GroupID, req []byte) error

// SetRequestHook installs h (nil: none).
func (n *Network) SetRequestHook(h RequestHook) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.hook = h
}

// Request is multiraft.Requester for the endpoint: delivered at once, on the caller's
// goroutine, to the receiving node's Host.HandleRequest, whatever the network's clock (a
// request is a synchronous exchange; drops, delays and duplicates do not apply, cuts do).
func (e endpoint) Request(ctx context.Context, to multiraft.NodeID, group multiraft.GroupID, req []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n := e.n
	n.mu.Lock()
	r := n.nodes[to]
	cut := n.faults(e.from, to).Cut || n.faults(to, e.from).Cut
	hook := n.hook
	n.mu.Unlock()
	if r == nil || cut {
		return nil, fmt.Errorf("%w: node %d", ErrUnreachable, to)
	}
	if hook != nil {
		if err := hook(e.from, to, group, req); err != nil {
			return nil, err
		}
	}
	rh, ok := r.(multiraft.RequestHandler)
	if !ok {
		return nil, fmt.Errorf("%w: node %d handles none", multiraft.ErrNoRequests, to)
	}
	resp, err := rh.HandleRequest(e.from, group, req)
	if err != nil {
		// As over a real transport: the error's text, not the value, comes back.
		return nil, &multiraft.RemoteError{Node: to, Msg: err.Error()}
	}
	return resp, nil
}
