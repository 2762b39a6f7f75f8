package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluice-mq/sluice/client"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
	"github.com/sluice-mq/sluice/proto/sluice/v1/sluicev1connect"
)

// flakyLeader answers NOT_LEADER (no leader known) to the first `refusals` calls of
// GetQueue and Produce, then succeeds.
type flakyLeader struct {
	sluicev1connect.UnimplementedQueueServiceHandler
	sluicev1connect.UnimplementedTopicServiceHandler
	refusals int32
	calls    atomic.Int32
}

func notLeaderErr() error {
	e := connect.NewError(connect.CodeUnavailable, errors.New("no leader is known (an election is under way)"))
	if d, err := connect.NewErrorDetail(&sluicev1.ErrorInfo{Reason: "NOT_LEADER"}); err == nil {
		e.AddDetail(d)
	}
	return e
}

func (f *flakyLeader) GetQueue(context.Context, *connect.Request[sluicev1.GetQueueRequest]) (*connect.Response[sluicev1.GetQueueResponse], error) {
	if f.calls.Add(1) <= f.refusals {
		return nil, notLeaderErr()
	}
	return connect.NewResponse(&sluicev1.GetQueueResponse{Queue: &sluicev1.Queue{Name: "q"}}), nil
}

func (f *flakyLeader) Produce(context.Context, *connect.Request[sluicev1.ProduceRequest]) (*connect.Response[sluicev1.ProduceResponse], error) {
	f.calls.Add(1)
	return nil, notLeaderErr()
}

func serveFlaky(t *testing.T, f *flakyLeader) *client.Client {
	mux := http.NewServeMux()
	mux.Handle(sluicev1connect.NewQueueServiceHandler(f))
	mux.Handle(sluicev1connect.NewTopicServiceHandler(f))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return client.New(srv.URL)
}

// A call answered NOT_LEADER (not carried out: no leader known yet) is retried with
// backoff until a leader answers; an answer that stays NOT_LEADER is returned after the
// retry window, and a Produce (which may have written some partitions) is never retried.
func TestNotLeaderIsRetried(t *testing.T) {
	f := &flakyLeader{refusals: 3}
	c := serveFlaky(t, f)
	q, err := c.GetQueue(t.Context(), "q")
	if err != nil || q.GetName() != "q" || f.calls.Load() != 4 {
		t.Fatalf("GetQueue after three NOT_LEADER: %v %v, %d calls (want 4)", q, err, f.calls.Load())
	}

	f = &flakyLeader{refusals: 1 << 30}
	c = serveFlaky(t, f)
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := c.GetQueue(ctx, "q"); client.ReasonOf(err) != "NOT_LEADER" || time.Since(start) > 2*time.Second {
		t.Errorf("GetQueue with no leader ever: %v after %v, want NOT_LEADER when the context ends", err, time.Since(start))
	}
	if f.calls.Load() < 2 {
		t.Errorf("GetQueue was not retried: %d calls", f.calls.Load())
	}

	f = &flakyLeader{}
	c = serveFlaky(t, f)
	if _, err := c.Produce(t.Context(), "t", []*client.ProduceRecord{{Value: []byte("x")}}, nil); client.ReasonOf(err) != "NOT_LEADER" || f.calls.Load() != 1 {
		t.Errorf("Produce answered NOT_LEADER: %v after %d calls, want NOT_LEADER after 1", err, f.calls.Load())
	}
}
