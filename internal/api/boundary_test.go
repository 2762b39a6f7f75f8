package api_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/api"
	"github.com/sluice-mq/sluice/internal/broker"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
	"github.com/sluice-mq/sluice/proto/sluice/v1/sluicev1connect"
	"github.com/sluice-mq/sluice/sluicetest"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// serve mounts the API over a real broker, plus extra handlers, on an
// httptest server; draining is the API's drain signal.
func serve(t *testing.T, draining chan struct{}, extra func(mux *http.ServeMux, a *api.API)) *client.Client {
	t.Helper()
	b, err := broker.Open(broker.Options{Dir: t.TempDir(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	a := api.New(api.Options{Broker: b, Logger: quiet(), Draining: draining})
	mux := http.NewServeMux()
	for _, r := range a.Routes() {
		mux.Handle(r.Pattern, r.Handler)
	}
	if extra != nil {
		extra(mux, a)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return client.New(srv.URL)
}

// A handler that panics answers Connect's internal error with the INTERNAL
// reason, and the process goes on serving. The panicking handler is built
// with the same options as every real one (HandlerOptions).
func TestHandlerPanicAnswersInternalAndServingGoesOn(t *testing.T) {
	c := serve(t, nil, func(mux *http.ServeMux, a *api.API) {
		h := connect.NewUnaryHandler(sluicev1connect.QueueServiceAckProcedure,
			func(context.Context, *connect.Request[sluicev1.AckRequest]) (*connect.Response[sluicev1.AckResponse], error) {
				panic("a bug in a handler")
			}, a.HandlerOptions()...)
		mux.Handle(sluicev1connect.QueueServiceAckProcedure, h)
	})
	ctx := t.Context()
	for range 2 { // twice: the first panic did not take anything down
		err := c.Ack(ctx, "q", "r")
		if !errors.Is(err, client.ErrInternal) || connect.CodeOf(err) != connect.CodeInternal {
			t.Fatalf("panicking handler answered %v (code %v), want internal/INTERNAL", err, connect.CodeOf(err))
		}
	}
	if _, err := c.CreateQueue(ctx, "after-panic", nil); err != nil {
		t.Fatalf("serving after a panic: %v", err)
	}
}

func TestOversizedRequestIsRefusedAndChangesNothing(t *testing.T) {
	c, _ := sluicetest.New(t, sluicetest.WithMaxRequestBytes(4096))
	ctx := t.Context()
	if _, err := c.CreateQueue(ctx, "small", nil); err != nil {
		t.Fatal(err)
	}
	_, err := c.Send(ctx, "small", make([]byte, 8192))
	if connect.CodeOf(err) != connect.CodeResourceExhausted || !errors.Is(err, client.ErrRequestTooLarge) {
		t.Fatalf("oversized send: %v (code %v), want resource_exhausted", err, connect.CodeOf(err))
	}
	q, err := c.GetQueue(ctx, "small")
	if err != nil || q.GetStats().GetSentTotal() != 0 {
		t.Errorf("after a refused send: %v, %v", q.GetStats(), err)
	}
}

func TestMalformedAndUnknownCallsGetClearErrors(t *testing.T) {
	srv := sluicetest.Start(t)
	for _, tc := range []struct {
		path, body string
		status     int
		want       string
	}{
		{"/sluice.v1.QueueService/Send", `{"queue": "x", "message": `, 400, `"code":"invalid_argument"`},
		{"/sluice.v1.QueueService/Send", `{"queue": "x", "nosuchfield": 1}`, 400, `"code":"invalid_argument"`},
		{"/sluice.v1.QueueService/Explode", `{}`, 404, ``},
		{"/sluice.v1.QueueService/CreateQueue", `{"name": "has space"}`, 400, `INVALID_NAME`},
	} {
		resp, err := http.Post(srv.URL+tc.path, "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.want) {
			t.Errorf("POST %s %s = %d %s; want %d containing %q", tc.path, tc.body, resp.StatusCode, b, tc.status, tc.want)
		}
	}
}

// Once the server drains, a long poll answers at once, empty, instead of
// holding shutdown up for its whole wait.
func TestLongPollAnswersAtOnceWhenDraining(t *testing.T) {
	draining := make(chan struct{})
	c := serve(t, draining, nil)
	ctx := t.Context()
	if _, err := c.CreateQueue(ctx, "idle", nil); err != nil {
		t.Fatal(err)
	}
	close(draining)
	start := time.Now()
	msgs, err := c.Receive(ctx, "idle", client.Wait(20*time.Second))
	if err != nil || len(msgs) != 0 {
		t.Fatalf("receive while draining: %v, %v", msgs, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("receive while draining took %v; it should not wait", d)
	}
}

// A Consume stream ends cleanly, without an error, when the server drains.
func TestConsumeEndsCleanlyWhenDraining(t *testing.T) {
	draining := make(chan struct{})
	c := serve(t, draining, nil)
	ctx := t.Context()
	if _, err := c.CreateQueue(ctx, "s", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, "s", []byte("first")); err != nil {
		t.Fatal(err)
	}
	got := 0
	for m, err := range c.Consume(ctx, "s") {
		if err != nil {
			t.Fatalf("stream error: %v", err)
		}
		got++
		if string(m.GetBody()) == "first" {
			close(draining) // the stream is running; now the server drains
		}
	}
	if got != 1 {
		t.Errorf("got %d messages, want 1", got)
	}
}
