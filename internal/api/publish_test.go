package api_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluice-mq/sluice/internal/api"
	"github.com/sluice-mq/sluice/internal/broker"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
	"github.com/sluice-mq/sluice/proto/sluice/v1/sluicev1connect"
)

// h2cServer serves h over HTTP/1.1 and cleartext HTTP/2 (the streams need
// the latter), and returns a StreamService client speaking HTTP/2 to it.
func h2cServer(t *testing.T, h http.Handler, opts ...connect.ClientOption) sluicev1connect.StreamServiceClient {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	return sluicev1connect.NewStreamServiceClient(&http.Client{Transport: tr}, srv.URL, opts...)
}

// streamAPI is an API without auth over a fresh broker, with topic "t"
// (records up to 1 KiB) and queue "q" (messages up to 1 KiB).
func streamAPI(t *testing.T, maxRequest int64) (*broker.Broker, sluicev1connect.StreamServiceClient) {
	t.Helper()
	return streamAPIDraining(t, maxRequest, nil)
}

func streamAPIDraining(t *testing.T, maxRequest int64, draining chan struct{}) (*broker.Broker, sluicev1connect.StreamServiceClient) {
	t.Helper()
	b, err := broker.Open(broker.Options{Dir: t.TempDir(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if _, err := b.CreateTopic(broker.TopicSettings{Name: "t", Partitions: 1, MaxMessageBytes: 1024}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateQueue(broker.QueueSettings{Name: "q", MaxMessageBytes: 1024}); err != nil {
		t.Fatal(err)
	}
	a := api.New(api.Options{Broker: b, Logger: quiet(), MaxRequestBytes: maxRequest, Draining: draining})
	mux := http.NewServeMux()
	for _, r := range a.Routes() {
		mux.Handle(r.Pattern, r.Handler)
	}
	return b, h2cServer(t, mux)
}

func topicReq(id uint64, topic string, values ...[]byte) *sluicev1.PublishRequest {
	r := &sluicev1.PublishRequest{Id: id, Destination: &sluicev1.PublishRequest_Topic{Topic: topic}}
	for _, v := range values {
		r.Records = append(r.Records, &sluicev1.ProduceRecord{Value: v})
	}
	return r
}

func queueReq(id uint64, queue string, bodies ...[]byte) *sluicev1.PublishRequest {
	r := &sluicev1.PublishRequest{Id: id, Destination: &sluicev1.PublishRequest_Queue{Queue: queue}}
	for _, b := range bodies {
		r.Messages = append(r.Messages, &sluicev1.SendEntry{Body: b})
	}
	return r
}

// Requests sent without waiting are answered in request order, each entry
// with the next offset of the log: the stream's order is the log's.
func TestPublishAnswersInOrder(t *testing.T) {
	b, c := streamAPI(t, 0)
	ctx := t.Context()
	s := c.Publish(ctx)
	const n = 200
	for i := range n {
		if err := s.Send(topicReq(uint64(1000+i), "t", []byte{byte(i)}, []byte{byte(i), 1})); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CloseRequest(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		resp, err := s.Receive()
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		if resp.GetId() != uint64(1000+i) || len(resp.GetResults()) != 2 {
			t.Fatalf("answer %d: id %d with %d results, want id %d with 2", i, resp.GetId(), len(resp.GetResults()), 1000+i)
		}
		for j, r := range resp.GetResults() {
			if want := int64(2*i + j); r.GetError() != nil || r.GetRecord().GetOffset() != want {
				t.Fatalf("answer %d entry %d: %v, want offset %d", i, j, r, want)
			}
		}
	}
	if _, err := s.Receive(); err == nil {
		t.Error("the stream went on after every request was answered and the client closed")
	}
	res, err := b.Fetch(ctx, "t", 0, 0, broker.FetchOptions{MaxBytes: 1 << 20})
	if err != nil || res.HighWatermark != 2*n {
		t.Errorf("log: high watermark %d (%v), want %d", res.HighWatermark, err, 2*n)
	}
}

// Bad input is answered by the request or the entry it concerns, in
// Connect's terms, and the stream goes on: the neighbours of a refused
// entry are stored.
func TestPublishRefusalsPerEntry(t *testing.T) {
	_, c := streamAPI(t, 0)
	s := c.Publish(t.Context())
	big := bytes.Repeat([]byte("x"), 2048)
	tooMany := topicReq(6, "t")
	for range 1001 {
		tooMany.Records = append(tooMany.Records, &sluicev1.ProduceRecord{Value: []byte("v")})
	}
	type want struct{ code, reason string } // "" code: stored
	cases := []struct {
		req     *sluicev1.PublishRequest
		whole   *want  // the request refused as a whole
		entries []want // else per entry
	}{
		{req: topicReq(1, "t", []byte("a"), big, []byte("c")),
			entries: []want{{}, {"invalid_argument", "MESSAGE_TOO_LARGE"}, {}}},
		{req: queueReq(2, "q", []byte("a"), big),
			entries: []want{{}, {"invalid_argument", "MESSAGE_TOO_LARGE"}}},
		{req: topicReq(3, "nope", []byte("a")), entries: []want{{"not_found", "TOPIC_NOT_FOUND"}}},
		{req: queueReq(4, "nope", []byte("a")), entries: []want{{"not_found", "QUEUE_NOT_FOUND"}}},
		{req: &sluicev1.PublishRequest{Id: 5, Records: []*sluicev1.ProduceRecord{{Value: []byte("a")}}},
			whole: &want{"invalid_argument", "INVALID_ARGUMENT"}},
		{req: tooMany, whole: &want{"invalid_argument", "INVALID_ARGUMENT"}},
		{req: topicReq(7, "t"), whole: &want{"invalid_argument", "INVALID_ARGUMENT"}},
		{req: &sluicev1.PublishRequest{Id: 8, Destination: &sluicev1.PublishRequest_Queue{Queue: "q"},
			Records: []*sluicev1.ProduceRecord{{Value: []byte("a")}}}, whole: &want{"invalid_argument", "INVALID_ARGUMENT"}},
		{req: topicReq(9, "t", []byte("still open")), entries: []want{{}}},
	}
	for _, tc := range cases {
		if err := s.Send(tc.req); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range cases {
		resp, err := s.Receive()
		if err != nil {
			t.Fatalf("request %d: %v", tc.req.GetId(), err)
		}
		id := resp.GetId()
		if tc.whole != nil {
			if e := resp.GetError(); e.GetCode() != tc.whole.code || e.GetInfo().GetReason() != tc.whole.reason || len(resp.GetResults()) != 0 {
				t.Errorf("request %d: %v, want the whole request refused %v", id, resp, *tc.whole)
			}
			continue
		}
		if len(resp.GetResults()) != len(tc.entries) {
			t.Fatalf("request %d: %d results, want %d", id, len(resp.GetResults()), len(tc.entries))
		}
		for j, w := range tc.entries {
			r := resp.GetResults()[j]
			stored := r.GetRecord() != nil || r.GetMessage() != nil
			if got := (want{r.GetError().GetCode(), r.GetError().GetInfo().GetReason()}); got != w || stored != (w.code == "") {
				t.Errorf("request %d entry %d: %v, want %v", id, j, r, w)
			}
		}
	}
	_ = s.CloseRequest()
}

// A request message over MaxRequestBytes cannot be read, so it ends the
// stream with resource_exhausted (the answers before it still come).
func TestPublishOversizedRequestEndsStream(t *testing.T) {
	_, c := streamAPI(t, 4096)
	s := c.Publish(t.Context())
	if err := s.Send(topicReq(1, "t", []byte("ok"))); err != nil {
		t.Fatal(err)
	}
	_ = s.Send(topicReq(2, "t", bytes.Repeat([]byte("x"), 8000)))
	if resp, err := s.Receive(); err != nil || resp.GetResults()[0].GetRecord() == nil {
		t.Fatalf("first answer: %v, %v", resp, err)
	}
	_, err := s.Receive()
	if connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Errorf("after the oversized request: %v, want resource_exhausted", err)
	}
}

// Authorization is per request: on one stream alice's request for a topic
// she may not produce to is answered permission_denied and her next one
// is stored. Without a token the stream itself is refused.
func TestPublishAuthorizedPerRequest(t *testing.T) {
	f, h := newAuthAPI(t)
	ctx := t.Context()
	for _, name := range []string{"events", "audit"} {
		if _, err := f.b.CreateTopic(broker.TopicSettings{Name: name, Partitions: 1}); err != nil {
			t.Fatal(err)
		}
	}
	c := h2cServer(t, h, connect.WithInterceptors(streamHeader("Bearer "+aliceToken)))
	s := c.Publish(ctx)
	for i, topic := range []string{"events", "audit", "events"} {
		if err := s.Send(topicReq(uint64(i), topic, []byte("v"))); err != nil {
			t.Fatal(err)
		}
	}
	for i, wantCode := range []string{"", "permission_denied", ""} {
		resp, err := s.Receive()
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.GetResults()[0].GetError().GetCode(); got != wantCode {
			t.Errorf("request %d: %v, want code %q", i, resp, wantCode)
		}
	}
	if f.failed("native/denied") == 0 {
		t.Error("the refusal was not counted as an authorization failure")
	}
	_ = s.CloseRequest()

	anon := h2cServer(t, h).Publish(ctx)
	_ = anon.Send(topicReq(1, "events", []byte("v")))
	if _, err := anon.Receive(); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("no token: %v, want unauthenticated", err)
	}
}

// streamHeader sets Authorization on streams (auth_test's header does unary calls).
type streamHeader string

func (h streamHeader) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc { return next }
func (h streamHeader) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("Authorization", string(h))
		return conn
	}
}
func (h streamHeader) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// Acks on the Consume stream: answered in order, durable, and a bad start
// or a second start is refused in Connect's terms.
func TestStreamConsumeAcks(t *testing.T) {
	b, c := streamAPI(t, 0)
	ctx := t.Context()
	for range 5 {
		if _, err := b.Send(ctx, "q", []broker.SendInput{{Body: []byte("m")}}); err != nil {
			t.Fatal(err)
		}
	}
	s := c.Consume(ctx)
	if err := s.Send(&sluicev1.StreamServiceConsumeRequest{Start: &sluicev1.ConsumeRequest{Queue: "q", MaxInFlight: 5}}); err != nil {
		t.Fatal(err)
	}
	var receipts []string
	for len(receipts) < 5 {
		r, err := s.Receive()
		if err != nil {
			t.Fatal(err)
		}
		receipts = append(receipts, r.GetMessage().GetReceipt())
	}
	_ = s.Send(&sluicev1.StreamServiceConsumeRequest{Acks: receipts[:2]})
	_ = s.Send(&sluicev1.StreamServiceConsumeRequest{Acks: append(receipts[2:], "bogus")})
	_ = s.Send(&sluicev1.StreamServiceConsumeRequest{Start: &sluicev1.ConsumeRequest{Queue: "q"}, Acks: []string{"x"}})
	for i, want := range [][]string{{"", ""}, {"", "", "", "RECEIPT_INVALID"}, {"INVALID_ARGUMENT"}} {
		r, err := s.Receive()
		if err != nil {
			t.Fatal(err)
		}
		if len(r.GetAcks()) != len(want) {
			t.Fatalf("ack answer %d: %v, want %d results", i, r, len(want))
		}
		for j, w := range want {
			if got := r.GetAcks()[j].GetError().GetReason(); got != w {
				t.Errorf("ack answer %d receipt %d: %q, want %q", i, j, got, w)
			}
		}
	}
	if st, err := b.QueueStats("q"); err != nil || st.Visible+st.InFlight != 0 {
		t.Errorf("queue after the acks: %+v, %v; want empty", st, err)
	}
	_ = s.CloseRequest()

	bad := c.Consume(ctx)
	_ = bad.Send(&sluicev1.StreamServiceConsumeRequest{Acks: []string{"x"}})
	if _, err := bad.Receive(); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("acks before start: %v, want invalid_argument", err)
	}
	missing := c.Consume(ctx)
	_ = missing.Send(&sluicev1.StreamServiceConsumeRequest{Start: &sluicev1.ConsumeRequest{Queue: "nope"}})
	if _, err := missing.Receive(); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("unknown queue: %v, want not_found", err)
	}

}

// When the server starts draining, an open Publish stream ends (after
// answering what it took) instead of holding the shutdown up.
func TestPublishEndsOnDrain(t *testing.T) {
	draining := make(chan struct{})
	_, c := streamAPIDraining(t, 0, draining)
	s := c.Publish(t.Context())
	if err := s.Send(topicReq(1, "t", []byte("a"))); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Receive(); err != nil || r.GetResults()[0].GetRecord() == nil {
		t.Fatalf("before the drain: %v, %v", r, err)
	}
	close(draining)
	ended := make(chan error, 1)
	go func() {
		_, err := s.Receive()
		ended <- err
	}()
	select {
	case err := <-ended:
		if err == nil {
			t.Error("an answer after the drain, with no request sent")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream stayed open after the server began draining")
	}
}
