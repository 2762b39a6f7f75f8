// Package peerhttp addresses the nodes of a cluster for HTTP calls made over the cluster
// transport's byte streams (tcptransport.DialStream) instead of a node's client
// listeners: the host name that stands for a node in such a call's URL, and the dialler an
// http.Transport uses to reach it.
//
// It owns only that naming and dialling. Which calls go this way, and what a node trusts
// of a call that came this way, are the front-ends' (internal/api/forward.go,
// internal/sqs/forward.go); opening and serving the streams is the node's
// (internal/node/peerstreams.go). It must never import the broker, a front-end or the
// transport: front-ends import it, and the transport is handed in as a function.
package peerhttp

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
)

// Dial opens a byte stream to node over the cluster transport.
type Dial func(ctx context.Context, node int32) (net.Conn, error)

const suffix = ".sluice-peer"

// Host is the host that stands for node in the URL of a call made over the transport. It
// is no DNS name: only DialContext resolves it.
func Host(node int32) string { return "node-" + strconv.Itoa(int(node)) + suffix }

// NodeOf is the node Host named in hostport, with or without a port (0: none).
func NodeOf(hostport string) int32 {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	id, okPrefix := strings.CutPrefix(host, "node-")
	id, okSuffix := strings.CutSuffix(id, suffix)
	if !okPrefix || !okSuffix || id == "" || id[0] == '+' {
		return 0
	}
	n, err := strconv.ParseInt(id, 10, 32)
	if err != nil || n <= 0 {
		return 0
	}
	return int32(n)
}

// DialContext is an http.Transport's DialContext that reaches the node a Host names
// through dial. Every failure is a *net.OpError whose Op is "dial": the stream was not
// opened, so nothing of the call was sent (a caller may take it as not carried out).
func DialContext(dial Dial) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, _, addr string) (net.Conn, error) {
		node := NodeOf(addr)
		if node == 0 {
			return nil, &net.OpError{Op: "dial", Net: "sluice-peer", Err: errors.New("not a node's address: " + addr)}
		}
		c, err := dial(ctx, node)
		if err != nil {
			return nil, &net.OpError{Op: "dial", Net: "sluice-peer", Err: err}
		}
		return c, nil
	}
}
