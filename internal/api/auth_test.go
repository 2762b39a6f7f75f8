package api_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/api"
	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
)

// The tokens of the test's users file (stored hashed, as the CLI would).
const (
	aliceToken = "sl_alice-token"
	bobToken   = "sl_bob-token"
	opsToken   = "sl_ops-token"
)

// authFixture is an API with authentication on over a real broker.
type authFixture struct {
	b        *broker.Broker
	store    *auth.Store
	url      string
	mu       sync.Mutex
	failures map[string]int // protocol/reason -> count
}

// testUsers: alice owns queue:orders* and topic:events; bob may only
// consume queue:orders; carol (a certificate's CN, in no users list) may
// describe and consume queue:orders.
func testUsers() *auth.File {
	return &auth.File{
		Users: []auth.User{
			{Name: "alice", Tokens: []string{auth.HashToken(aliceToken)}},
			{Name: "bob", Tokens: []string{auth.HashToken(bobToken)}},
			{Name: "ops", Tokens: []string{auth.HashToken(opsToken)}},
		},
		ACLs: []auth.Rule{
			{User: "alice", Allow: []auth.Operation{auth.All}, Resources: []auth.Pattern{"queue:orders*", "topic:events", "group:g"}},
			{User: "bob", Allow: []auth.Operation{auth.Consume}, Resources: []auth.Pattern{"queue:orders"}},
			{User: "ops", Allow: []auth.Operation{auth.Describe}, Resources: []auth.Pattern{"cluster"}},
			{User: "carol", Allow: []auth.Operation{auth.Consume}, Resources: []auth.Pattern{"queue:orders"}},
		},
	}
}

func newAuthAPI(t *testing.T) (*authFixture, http.Handler) {
	t.Helper()
	f := &authFixture{failures: map[string]int{}}
	var err error
	f.b, err = broker.Open(broker.Options{Dir: t.TempDir(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.b.Close() })
	f.store, err = auth.NewStatic(testUsers(), auth.Options{Logger: quiet(), OnFailure: func(p, r string) {
		f.mu.Lock()
		f.failures[p+"/"+r]++
		f.mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	a := api.New(api.Options{Broker: f.b, Logger: quiet(), Auth: f.store})
	mux := http.NewServeMux()
	for _, r := range a.Routes() {
		mux.Handle(r.Pattern, r.Handler)
	}
	return f, mux
}

func startAuth(t *testing.T) *authFixture {
	f, h := newAuthAPI(t)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

func (f *authFixture) client(token string) *client.Client {
	if token == "" {
		return client.New(f.url)
	}
	return client.New(f.url, client.WithToken(token))
}

func (f *authFixture) failed(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failures[key]
}

func wantCode(t *testing.T, what string, err error, code connect.Code, sentinel error) {
	t.Helper()
	if connect.CodeOf(err) != code || !errors.Is(err, sentinel) {
		t.Errorf("%s: %v (code %v), want %v", what, err, connect.CodeOf(err), code)
	}
}

func TestBearerTokenAuthenticatesAndRulesAuthorize(t *testing.T) {
	f := startAuth(t)
	ctx := t.Context()
	if _, err := f.b.CreateQueue(broker.QueueSettings{Name: "orders"}); err != nil {
		t.Fatal(err)
	}
	sendAs := func(c *client.Client) error { _, err := c.Send(ctx, "orders", []byte("x")); return err }
	recvAs := func(c *client.Client) error { _, err := c.Receive(ctx, "orders", client.Wait(0)); return err }
	for _, tc := range []struct {
		name  string
		c     *client.Client
		call  func(*client.Client) error
		code  connect.Code // 0: success
		count string       // the failure counted
	}{
		{"no token", f.client(""), sendAs, connect.CodeUnauthenticated, "native/no_credentials"},
		{"unknown token", f.client("sl_nobody"), sendAs, connect.CodeUnauthenticated, "native/bad_credentials"},
		{"not a bearer", client.New(f.url, client.WithConnectOptions(connect.WithInterceptors(header("Basic YTpi")))), sendAs,
			connect.CodeUnauthenticated, "native/malformed"},
		{"bob may not send", f.client(bobToken), sendAs, connect.CodePermissionDenied, "native/denied"},
		{"bob may receive", f.client(bobToken), recvAs, 0, ""},
		{"alice may send", f.client(aliceToken), sendAs, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.failed(tc.count)
			err := tc.call(tc.c)
			switch tc.code {
			case 0:
				if err != nil {
					t.Fatalf("want success, got %v", err)
				}
				return
			case connect.CodeUnauthenticated:
				wantCode(t, tc.name, err, tc.code, client.ErrUnauthenticated)
			default:
				wantCode(t, tc.name, err, tc.code, client.ErrPermissionDenied)
			}
			if got := f.failed(tc.count); got != before+1 {
				t.Errorf("%s counted %d times, want 1", tc.count, got-before)
			}
		})
	}
}

// header is a client interceptor that sends a fixed Authorization header.
type header string

func (h header) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set("Authorization", string(h))
		return next(ctx, req)
	}
}
func (h header) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}
func (h header) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// No refused call reaches the broker: nothing is created, sent, received
// or purged, and the stream of Consume never starts.
func TestRefusedCallsNeverReachTheBroker(t *testing.T) {
	f := startAuth(t)
	// Bounded: on code that let the calls through, a Consume would wait.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := f.b.CreateQueue(broker.QueueSettings{Name: "orders"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.b.Send(context.Background(), "orders", []broker.SendInput{{Body: []byte("kept")}}); err != nil {
		t.Fatal(err)
	}
	before, _ := f.b.QueueStats("orders")
	for _, c := range []*client.Client{f.client(""), f.client("sl_wrong")} {
		if _, err := c.CreateQueue(ctx, "orders-new", nil); err == nil {
			t.Error("anonymous CreateQueue succeeded")
		}
		if _, err := c.Send(ctx, "orders", []byte("x")); err == nil {
			t.Error("anonymous Send succeeded")
		}
		if _, err := c.Receive(ctx, "orders", client.Wait(0)); err == nil {
			t.Error("anonymous Receive succeeded")
		}
		for _, err := range c.Consume(ctx, "orders") {
			wantCode(t, "anonymous Consume", err, connect.CodeUnauthenticated, client.ErrUnauthenticated)
			break
		}
	}
	bob := f.client(bobToken)
	if _, err := bob.PurgeQueue(ctx, "orders"); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("bob's purge: %v", err)
	}
	for _, err := range f.client("sl_wrong").Consume(ctx, "orders") {
		wantCode(t, "Consume with a wrong token", err, connect.CodeUnauthenticated, client.ErrUnauthenticated)
		break
	}
	// A stream is authorized on its request too: bob may not consume orders-2.
	for _, err := range bob.Consume(ctx, "orders-2") {
		wantCode(t, "bob's Consume of orders-2", err, connect.CodePermissionDenied, client.ErrPermissionDenied)
		break
	}
	after, _ := f.b.QueueStats("orders")
	before.OldestAge, after.OldestAge = 0, 0 // time passes
	if after != before {
		t.Errorf("refused calls changed the queue: before %+v, after %+v", before, after)
	}
	if slices.Contains(f.b.ListQueues(""), "orders-new") {
		t.Error("a refused CreateQueue created the queue")
	}
}

// Listings show only what the caller may describe, and pages are full of
// it.
func TestListingsShowOnlyWhatTheCallerMayDescribe(t *testing.T) {
	f := startAuth(t)
	ctx := t.Context()
	for _, q := range []string{"a-secret", "orders", "orders-eu", "payments"} {
		if _, err := f.b.CreateQueue(broker.QueueSettings{Name: q}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tp := range []string{"events", "audit"} {
		if _, err := f.b.CreateTopic(broker.TopicSettings{Name: tp, Partitions: 1}); err != nil {
			t.Fatal(err)
		}
	}
	names := func(c *client.Client) (qs, ts []string) {
		ql, err := c.ListQueues(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range ql {
			qs = append(qs, q.GetName())
		}
		tl, err := c.ListTopics(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, tp := range tl {
			ts = append(ts, tp.GetName())
		}
		return qs, ts
	}
	qs, ts := names(f.client(aliceToken))
	if !slices.Equal(qs, []string{"orders", "orders-eu"}) || !slices.Equal(ts, []string{"events"}) {
		t.Errorf("alice sees queues %v topics %v; want [orders orders-eu] [events]", qs, ts)
	}
	// Describe is implied by consume: bob sees the queue he reads.
	qs, ts = names(f.client(bobToken))
	if !slices.Equal(qs, []string{"orders"}) || len(ts) != 0 {
		t.Errorf("bob sees queues %v topics %v; want [orders] []", qs, ts)
	}
	if _, err := f.client("").ListQueues(ctx, ""); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("anonymous ListQueues: %v, want unauthenticated", err)
	}
}

// A redrive named by id is checked against its dead-letter queue, which
// only the broker knows.
func TestRedriveByIDIsCheckedAgainstItsQueue(t *testing.T) {
	f := startAuth(t)
	ctx := t.Context()
	for _, q := range []string{"orders-dlq", "orders"} {
		if _, err := f.b.CreateQueue(broker.QueueSettings{Name: q}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.b.Send(context.Background(), "orders-dlq", []broker.SendInput{{Body: []byte("dead")}}); err != nil {
		t.Fatal(err)
	}
	alice := f.client(aliceToken)
	r, err := alice.StartRedrive(ctx, &client.StartRedriveRequest{DeadLetterQueue: "orders-dlq", DestinationQueue: "orders", MaxPerSecond: 1})
	if err != nil {
		t.Fatal(err)
	}
	bob := f.client(bobToken)
	if _, err := bob.GetRedrive(ctx, r.GetId()); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("bob's GetRedrive: %v, want permission_denied", err)
	}
	if _, err := bob.CancelRedrive(ctx, r.GetId()); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Errorf("bob's CancelRedrive: %v, want permission_denied", err)
	}
	if l, err := bob.ListRedrives(ctx, ""); err != nil || len(l) != 0 {
		t.Errorf("bob's ListRedrives: %v %v, want none", l, err)
	}
	if _, err := alice.GetRedrive(ctx, r.GetId()); err != nil {
		t.Errorf("alice's GetRedrive: %v", err)
	}
}

// With authentication off (no store) every call works without a token, as
// before.
func TestNoStoreMeansNoAuthentication(t *testing.T) {
	c := serve(t, nil, nil)
	if _, err := c.CreateQueue(t.Context(), "open", nil); err != nil {
		t.Fatal(err)
	}
}

// The operator's HTTP reports take the same credentials.
func TestGuardHTTP(t *testing.T) {
	f, _ := newAuthAPI(t)
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("report")) })
	srv := httptest.NewServer(api.GuardHTTP(f.store, auth.Describe, auth.Resource{Kind: auth.Cluster}, ok))
	defer srv.Close()
	for _, tc := range []struct {
		auth string
		want int
	}{
		{"", http.StatusUnauthorized},
		{"Bearer sl_wrong", http.StatusUnauthorized},
		{"Bearer " + aliceToken, http.StatusForbidden}, // alice has no cluster rule
		{"Bearer " + opsToken, http.StatusOK},
	} {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("Authorization %q: %d, want %d", tc.auth, resp.StatusCode, tc.want)
		}
	}
}

// A stream carries the token too: alice's Consume delivers.
func TestConsumeStreamWithAToken(t *testing.T) {
	f := startAuth(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := f.b.CreateQueue(broker.QueueSettings{Name: "orders"}); err != nil {
		t.Fatal(err)
	}
	alice := f.client(aliceToken)
	if _, err := alice.Send(ctx, "orders", []byte("streamed")); err != nil {
		t.Fatal(err)
	}
	for m, err := range alice.Consume(ctx, "orders") {
		if err != nil {
			t.Fatalf("alice's Consume: %v", err)
		}
		if string(m.GetBody()) != "streamed" {
			t.Errorf("got %q", m.GetBody())
		}
		break
	}
}
