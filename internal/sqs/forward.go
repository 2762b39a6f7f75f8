package sqs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/peerhttp"
)

// Forwarding inside a cluster (docs/cluster.md, "Queues in a cluster"). A request the
// broker answers with *broker.NotLeaderError naming a leader (a queue's group, or the
// catalog for CreateQueue and friends) is proxied once to that node's registered SQS
// address: same method, path and query, headers and body, and the same Host header, so a
// SigV4 signature made for this node stays valid there. The client never sees leadership.
// A request that came over TLS goes over a byte stream of the cluster transport instead
// (Config.DialPeer; the nodes' mutual TLS), so what the client encrypted is not sent on in
// clear, and a node with no plain SQS listener still forwards; the leader checks the
// signature again all the same. A leader that serves no such streams (a binary from before
// them) is asked over plain HTTP, as before.
// The leader answers with queue URLs naming the node the client used, which the
// forwarded-base header carries. A request that arrives forwarded is never forwarded again
// (no loops while leadership moves): it, and a request whose leader is unknown, is
// answered ServiceUnavailable, which every SQS SDK retries.

// forwardedHeader marks a forwarded request; its value is the scheme://host the client
// used, for the queue URLs of the answer.
const forwardedHeader = "X-Sluice-Forwarded-Base"

// forwardTimeout bounds a forward: more than the longest long poll (20 s) plus a commit.
const forwardTimeout = 30 * time.Second

// hopHeaders are not passed on by a proxy (RFC 9110 7.6.1).
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

var forwardClient = newForwardClient(nil)

// forward answers a request whose action failed with err by proxying it to the leader,
// when err is a NotLeaderError. It reports whether it answered.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, c *call, err error) bool {
	var nl *broker.NotLeaderError
	if !errors.As(err, &nl) {
		return false
	}
	addr, known := "", false
	for _, n := range h.b.ClusterNodes() {
		if n.ID == nl.Leader && n.ID != h.b.NodeID() {
			addr, known = n.SQSAddr, true
		}
	}
	// Over the cluster transport: a request that came over TLS, and one for a leader with
	// no plain SQS listener (a node serving SQS over TLS only).
	viaPeer := h.peerClient != nil && known && (r.TLS != nil || addr == "")
	if (addr == "" && !viaPeer) || r.Header.Get(forwardedHeader) != "" {
		h.writeError(w, c, newError(errUnavailable, "%v; retry", nl))
		return true
	}
	ctx, cancel := context.WithTimeout(r.Context(), forwardTimeout)
	defer cancel()
	var resp *http.Response
	var rerr error
	if viaPeer {
		resp, rerr = h.forwardTo(ctx, h.peerClient, "http://"+peerhttp.Host(nl.Leader), r, c)
		var op *net.OpError
		if rerr != nil && errors.As(rerr, &op) && op.Op == "dial" && addr != "" {
			// No stream (a leader from before them, or one that just died): nothing was
			// sent, so the plain listener may be asked.
			h.log.Debug("sqs: no stream to the leader; forwarding over plain HTTP", "leader", nl.Leader, "err", rerr)
			resp, rerr = h.forwardTo(ctx, forwardClient, "http://"+addr, r, c)
		}
	} else {
		resp, rerr = h.forwardTo(ctx, forwardClient, "http://"+addr, r, c)
	}
	if rerr != nil {
		h.log.Debug("sqs: forwarding failed", "action", c.action, "leader", nl.Leader, "err", rerr)
		h.writeError(w, c, newError(errUnavailable, "forwarding to node %d, which leads %s: %v", nl.Leader, nl.What, rerr))
		return true
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	for _, k := range hopHeaders {
		w.Header().Del(k)
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
	return true
}

// forwardTo sends r, whose body c holds, to base (the leader) with hc, as it came: same
// method, path and query, headers (but the hop-by-hop ones) and Host, marked with the base
// URL the client used.
func (h *Handler) forwardTo(ctx context.Context, hc *http.Client, base string, r *http.Request, c *call) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, r.Method, base+r.URL.RequestURI(), bytes.NewReader(c.raw))
	if err != nil {
		return nil, err
	}
	req.Header = r.Header.Clone()
	for _, k := range hopHeaders {
		req.Header.Del(k)
	}
	req.Host = r.Host
	req.Header.Set(forwardedHeader, h.base(c))
	return hc.Do(req)
}

// newForwardClient is an HTTP client for forwards, dialling with dial (nil: TCP).
func newForwardClient(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Client {
	return &http.Client{
		Transport: &http.Transport{DialContext: dial, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second,
			ResponseHeaderTimeout: forwardTimeout},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// forwardedBase is the base URL a forwarding node put in the request, if it is one.
func forwardedBase(r *http.Request) string {
	v := r.Header.Get(forwardedHeader)
	if v == "" {
		return ""
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}
