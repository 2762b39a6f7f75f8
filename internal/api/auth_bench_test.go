package api_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/api"
	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
)

// BenchmarkAuthOverhead is the cost of authentication on a call that does
// no I/O (GetQueue) and on a send (fsync off), with authentication off and
// with a bearer token checked against 100 rules:
//
//	go test -run '^$' -bench AuthOverhead -benchtime 20000x ./internal/api/
func BenchmarkAuthOverhead(b *testing.B) {
	f := testUsers()
	for i := range 100 { // a realistic rule list, the matching rule last
		f.ACLs = append([]auth.Rule{{User: "other", Allow: []auth.Operation{auth.Produce},
			Resources: []auth.Pattern{auth.Pattern("queue:q" + string(rune('a'+i%26)))}}}, f.ACLs...)
	}
	store, err := auth.NewStatic(f, auth.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		store *auth.Store
		opts  []client.Option
	}{
		{"off", nil, nil},
		{"token", store, []client.Option{client.WithToken(aliceToken)}},
	} {
		br, err := broker.Open(broker.Options{Dir: b.TempDir(), Logger: quiet(), Sync: broker.SyncPolicy{Mode: broker.SyncNever}})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := br.CreateQueue(broker.QueueSettings{Name: "orders"}); err != nil {
			b.Fatal(err)
		}
		a := api.New(api.Options{Broker: br, Logger: quiet(), Auth: tc.store})
		mux := http.NewServeMux()
		for _, r := range a.Routes() {
			mux.Handle(r.Pattern, r.Handler)
		}
		srv := httptest.NewServer(mux)
		c := client.New(srv.URL, tc.opts...)
		b.Run("GetQueue/"+tc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := c.GetQueue(b.Context(), "orders"); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("Send/"+tc.name, func(b *testing.B) {
			body := make([]byte, 256)
			for b.Loop() {
				if _, err := c.Send(b.Context(), "orders", body); err != nil {
					b.Fatal(err)
				}
			}
		})
		srv.Close()
		br.Close()
	}
}
