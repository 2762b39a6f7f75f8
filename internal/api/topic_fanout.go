package api

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-mq/sluice/internal/broker"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
	"github.com/sluice-mq/sluice/proto/sluice/v1/sluicev1connect"
)

// Fan-out inside a cluster (docs/cluster.md, "Native API forwarding"). A Fetch or a
// ListOffsets names partitions, and in a cluster their leaders may be several nodes: no
// one node can take the whole call, so forward.go's proxy (one call, one leader) cannot
// help. The node the client called answers what it leads itself and asks each other
// leader, concurrently, for the partitions that node leads — one sub-call per leader, of
// the same procedure, with the caller's Authorization (the leader checks it again, as
// for a forwarded call) and the forwarded mark (a sub-call is never forwarded or fanned
// out again) — and puts the answers back in the order asked. The client sees one answer,
// whoever leads. A Fetch's long poll waits on every leader at once and answers as soon as
// any partition has records.
//
// A call that came over TLS is fanned out over the cluster transport, as it is forwarded
// (forward.go). Not fanned out, as not forwarded: a call that arrived forwarded, or over
// TLS on a node without the transport's streams. Those answer NOT_LEADER per partition
// (Fetch) or for the call (ListOffsets), and the Go client splits the call itself
// (client/topic_split.go).

// subCallSlack bounds a sub-call beyond the wait it asks for: a leader that does not
// answer (cut off, stalled) must not hold back what the others answered.
const subCallSlack = 5 * time.Second

// fanOut reports whether the call of ctx may be fanned out: it arrived in a cluster, not
// forwarded, and over TLS only where TLS calls are forwarded (forward.go put its slot in
// the context).
func (a *API) fanOut(ctx context.Context) bool {
	s, _ := ctx.Value(fwdKey).(*fwdSlot)
	return s != nil && a.fwd != nil
}

// peerClient is a client of node made by newClient (a sluicev1connect constructor), for
// the call of ctx: over the cluster transport for a call that came over TLS, else to
// node's plain HTTP listener (false: node is this one, or cannot be reached that way). Its
// answers are bounded as a proxied answer is.
func peerClient[C any](ctx context.Context, a *API, node int32,
	newClient func(connect.HTTPClient, string, ...connect.ClientOption) C) (C, bool) {
	s, _ := ctx.Value(fwdKey).(*fwdSlot)
	base, h1, _, _, ok := a.fwd.route(node, s != nil && s.overTLS)
	if !ok {
		var none C
		return none, false
	}
	return newClient(h1, base, connect.WithReadMaxBytes(maxForwardedAnswer)), true
}

// peerTopics is a TopicService client of node for the call of ctx (peerClient).
func (a *API) peerTopics(ctx context.Context, node int32) (sluicev1connect.TopicServiceClient, bool) {
	return peerClient(ctx, a, node, sluicev1connect.NewTopicServiceClient)
}

// subRequest is msg as a sub-call to node of the call of ctx, whose headers are hdr: with
// the caller's credential to node's plain listener, or over the cluster transport with the
// caller's name (forward.go's route and setIdentity).
func subRequest[T any](ctx context.Context, a *API, node int32, msg *T, hdr http.Header) *connect.Request[T] {
	r := connect.NewRequest(msg)
	for _, k := range []string{"Authorization", "Traceparent", "Tracestate"} {
		if v := hdr.Get(k); v != "" {
			r.Header().Set(k, v)
		}
	}
	s, _ := ctx.Value(fwdKey).(*fwdSlot)
	_, _, _, viaPeer, _ := a.fwd.route(node, s != nil && s.overTLS)
	a.fwd.setIdentity(r.Header(), viaPeer, principalOf(ctx))
	return r
}

// ledElsewhere groups the partitions of a Fetch answer (by position) answered NOT_LEADER
// naming a leader, by that leader.
func ledElsewhere(out *sluicev1.FetchResponse) map[int32][]int {
	var by map[int32][]int
	for i, p := range out.GetPartitions() {
		if l := leaderOf(p.GetError()); l != 0 {
			if by == nil {
				by = map[int32][]int{}
			}
			by[l] = append(by[l], i)
		}
	}
	return by
}

// fetchFrom fetches the partitions remote names (by position in m and out) from their
// leaders, concurrently, waiting up to wait on each, and puts each leader's answers in
// out; it returns how many records came. A sub-call that fails leaves its partitions'
// NOT_LEADER, or takes the leader's reason if it gave one (PERMISSION_DENIED, say).
func (t *topicService) fetchFrom(ctx context.Context, hdr http.Header, m *sluicev1.FetchRequest, out *sluicev1.FetchResponse, remote map[int32][]int, wait time.Duration) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := 0
	for leader, idx := range remote {
		peer, ok := t.peerTopics(ctx, leader)
		if !ok {
			continue
		}
		wg.Go(func() {
			sub := proto.CloneOf(m)
			sub.Partitions = make([]*sluicev1.PartitionOffset, len(idx))
			for j, i := range idx {
				sub.Partitions[j] = m.GetPartitions()[i]
			}
			sub.MaxWait = durationpb.New(wait)
			sctx, cancel := context.WithTimeout(ctx, wait+subCallSlack)
			defer cancel()
			res, err := peer.Fetch(sctx, subRequest(ctx, t.API, leader, sub, hdr))
			if err == nil && len(res.Msg.GetPartitions()) != len(idx) {
				err = connect.NewError(connect.CodeInternal, errors.New("a leader answered a Fetch with another number of partitions"))
			}
			if err != nil {
				t.log.Debug("api: fetch from a partition's leader failed", "leader", leader, "err", err)
				if info := errorInfoOf(err); info != nil && info.GetReason() != ReasonNotLeader {
					for _, i := range idx {
						out.Partitions[i].Error = info
					}
				}
				return
			}
			n := 0
			for j, i := range idx {
				out.Partitions[i] = res.Msg.GetPartitions()[j]
				n += len(out.Partitions[i].GetRecords())
			}
			mu.Lock()
			got += n
			mu.Unlock()
		})
	}
	wg.Wait()
	return got
}

// fetchAcross answers a Fetch some of whose partitions (remote, by position) other nodes
// lead; out and n are what this node read of its own. The others are read at their
// leaders; if nothing came anywhere and the caller allows a wait, every partition is
// long-polled where it is led and the whole call read again once one has records. The
// answer keeps max_records and, about, max_bytes in all, the first partitions' first.
func (t *topicService) fetchAcross(ctx context.Context, hdr http.Header, m *sluicev1.FetchRequest, out *sluicev1.FetchResponse, n int, remote map[int32][]int, wait time.Duration) (*connect.Response[sluicev1.FetchResponse], error) {
	n += t.fetchFrom(ctx, hdr, m, out, remote, 0)
	if n == 0 && wait > 0 && !advanced(out, m) {
		pollCtx, cancel := t.untilDrain(ctx)
		defer cancel()
		if t.waitAnywhere(pollCtx, hdr, m, out, remote, wait) {
			out, _ = t.fetchOnce(m)
			t.fetchFrom(ctx, hdr, m, out, ledElsewhere(out), 0)
		}
	}
	trimFetch(out, int(m.GetMaxRecords()), m.GetMaxBytes())
	return connect.NewResponse(out), nil
}

// trimFetch cuts out to maxRecords records (0: the default) and about maxBytes of keys,
// values and headers (0: the default; at least one record stays), keeping the first
// partitions' in order and moving each cut partition's next offset back to its first
// record left out. Leaders answer a fanned-out Fetch each within the whole budget.
func trimFetch(out *sluicev1.FetchResponse, maxRecords int, maxBytes int64) {
	if maxRecords <= 0 {
		maxRecords = defaultFetchRecords
	}
	if maxBytes <= 0 {
		maxBytes = defaultFetchBytes
	}
	records, bytes := 0, int64(0)
	for _, pr := range out.GetPartitions() {
		recs := pr.GetRecords()
		for i, r := range recs {
			size := int64(len(r.GetKey()) + len(r.GetValue()))
			for _, h := range r.GetHeaders() {
				size += int64(len(h.GetKey()) + len(h.GetValue()))
			}
			if records == maxRecords || (records > 0 && bytes+size > maxBytes) {
				pr.NextOffset = r.GetOffset()
				pr.Records = recs[:i]
				maxRecords = records // every later partition is cut to nothing
				break
			}
			records++
			bytes += size
		}
	}
}

// errorInfoOf is the ErrorInfo a Connect error carries (nil: none).
func errorInfoOf(err error) *sluicev1.ErrorInfo {
	var cerr *connect.Error
	if !errors.As(err, &cerr) {
		return nil
	}
	for _, d := range cerr.Details() {
		if v, derr := d.Value(); derr == nil {
			if info, ok := v.(*sluicev1.ErrorInfo); ok {
				return info
			}
		}
	}
	return nil
}

// waitAnywhere long-polls every partition of m — those led here on this node's logs,
// the others at their leaders — and reports whether any has records past what out
// holds before wait ends (or ctx does). The first to have some ends the others' waits.
func (t *topicService) waitAnywhere(ctx context.Context, hdr http.Header, m *sluicev1.FetchRequest, out *sluicev1.FetchResponse, remote map[int32][]int, wait time.Duration) bool {
	elsewhere := map[int]bool{}
	for _, idx := range remote {
		for _, i := range idx {
			elsewhere[i] = true
		}
	}
	var local []broker.FetchPosition
	for i, p := range m.GetPartitions() {
		if !elsewhere[i] {
			// As Fetch does: past what was read, not the offset asked (transactions).
			local = append(local, broker.FetchPosition{Topic: m.GetTopic(), Partition: p.GetPartition(),
				Offset: max(p.GetOffset(), out.Partitions[i].GetHighWatermark())})
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	woke := make(chan bool, 1+len(remote)) // buffered: no waiter blocks after we return
	waiters := 0
	if len(local) > 0 {
		waiters++
		go func() { woke <- t.b.WaitForData(wctx, local, wait) }()
	}
	for leader, idx := range remote {
		waiters++
		go func() {
			probe := &sluicev1.FetchResponse{Partitions: make([]*sluicev1.PartitionRecords, len(m.GetPartitions()))}
			for i := range probe.Partitions {
				probe.Partitions[i] = &sluicev1.PartitionRecords{}
			}
			n := t.fetchFrom(wctx, hdr, m, probe, map[int32][]int{leader: idx}, wait)
			moved := false
			for _, i := range idx {
				moved = moved || probe.Partitions[i].GetNextOffset() > m.GetPartitions()[i].GetOffset()
			}
			woke <- n > 0 || moved
		}()
	}
	for range waiters {
		if <-woke {
			return true
		}
	}
	return false
}

// listOffsetsFrom resolves the partitions remote names (by position in parts) at their
// leaders, concurrently, into out's places; the first sub-call that fails fails the call.
// A leader with no address known here fails it with the NOT_LEADER first met (notLed).
func (t *topicService) listOffsetsFrom(ctx context.Context, hdr http.Header, m *sluicev1.ListOffsetsRequest, parts []int32, out []*sluicev1.PartitionOffsetResult, remote map[int32][]int, notLed error) error {
	peers := map[int32]sluicev1connect.TopicServiceClient{}
	for leader := range remote {
		peer, ok := t.peerTopics(ctx, leader)
		if !ok {
			return notLed
		}
		peers[leader] = peer
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(remote))
	for leader, idx := range remote {
		peer := peers[leader]
		wg.Go(func() {
			sub := proto.CloneOf(m)
			sub.Partitions = make([]int32, len(idx))
			for j, i := range idx {
				sub.Partitions[j] = parts[i]
			}
			sctx, cancel := context.WithTimeout(ctx, subCallSlack)
			defer cancel()
			res, err := peer.ListOffsets(sctx, subRequest(ctx, t.API, leader, sub, hdr))
			if err == nil && len(res.Msg.GetPartitions()) != len(idx) {
				err = connect.NewError(connect.CodeInternal, errors.New("a leader answered a ListOffsets with another number of partitions"))
			}
			if err != nil {
				errs <- err
				return
			}
			for j, i := range idx {
				out[i] = res.Msg.GetPartitions()[j]
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs // nil when none failed
}
