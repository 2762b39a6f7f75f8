package console

import (
	"errors"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/client"
)

// Rates are per second between readings at least minSampleGap apart;
// a closer reading repeats the last rate, the first is unknown, and a
// counter that went down (a queue deleted and created again) is unknown.
func TestRates(t *testing.T) {
	now := time.Unix(1000, 0)
	c := &Console{opts: Options{Now: func() time.Time { return now }}, samples: map[string]sample{}}
	steps := []struct {
		after time.Duration
		a, b  uint64
		want  rate
	}{
		{0, 100, 50, rate{}},
		{4 * time.Second, 140, 50, rate{10, true}},
		{time.Second, 1000, 900, rate{10, true}},  // too close: the last rate
		{4 * time.Second, 180, 60, rate{8, true}}, // 40 in the 5 s since the kept reading
		{4 * time.Second, 5, 0, rate{}},           // went down
		{4 * time.Second, 25, 0, rate{5, true}},
	}
	for i, s := range steps {
		now = now.Add(s.after)
		if got, _ := c.rates("q", s.a, s.b); got != s.want {
			t.Errorf("step %d: %+v, want %+v", i, got, s.want)
		}
	}
}

// After signing in the browser goes only to a console page: never to
// another site, whatever next says.
func TestSafeNext(t *testing.T) {
	for next, want := range map[string]string{
		"/ui/queues/jobs?from=3":   "/ui/queues/jobs?from=3",
		"":                         "/ui/",
		"https://evil.example/ui/": "/ui/",
		"//evil.example/ui/":       "/ui/",
		"/metrics":                 "/ui/",
		"/ui":                      "/ui/",
		"javascript:alert(1)":      "/ui/",
	} {
		if got := safeNext(next); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", next, got, want)
		}
	}
}

// TestNodesAndAdminErrors: node ids print as the CLI prints them, and an admin refusal
// shows what the endpoint said — its JSON error, or the authorization guard's plain text
// naming who may not do what — rather than the bare status text.
func TestNodesAndAdminErrors(t *testing.T) {
	if got := funcs["nodes"].(func([]int32) string)([]int32{2, 3, 1}); got != "2, 3, 1" {
		t.Errorf("nodes = %q, want 2, 3, 1", got)
	}
	for _, tc := range []struct {
		status int
		body   string
		want   string
	}{
		{403, "permission_denied: mailer may not describe cluster\n", "permission_denied: mailer may not describe cluster"},
		{404, `{"error":"not a cluster"}`, "not a cluster"},
		{500, "", "Internal Server Error"},
		{502, "<html>proxy error</html>", "Bad Gateway"},
	} {
		err := adminError(tc.status, []byte(tc.body))
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Message != tc.want {
			t.Errorf("%d %q: %v, want message %q", tc.status, tc.body, err, tc.want)
		}
	}
}
