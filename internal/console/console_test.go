package console_test

import (
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/sluicetest"
)

// noRedirect is an HTTP client that shows redirects instead of following.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func get(t *testing.T, u string) (int, string, http.Header) {
	t.Helper()
	resp, err := noRedirect.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// Every page answers 200 with what it shows, / redirects to /ui/, an
// unknown queue is a 404 page, and a cross-origin POST is refused before
// anything moves.
func TestPagesAnswer(t *testing.T) {
	srv := sluicetest.Start(t)
	seed(t, client.New(srv.URL))
	if code, _, h := get(t, srv.URL+"/"); code != http.StatusFound || h.Get("Location") != "/ui/" {
		t.Errorf("/: %d %q", code, h.Get("Location"))
	}
	for path, want := range map[string]string{
		"/ui/":                  "dead letters in 1",
		"/ui/queues":            "jobs-dlq",
		"/ui/queues/jobs":       "hello",
		"/ui/queues/jobs-dlq":   "Preview redrive",
		"/ui/topics":            "events",
		"/ui/topics/events":     "browse",
		"/ui/topics/events/0":   "rec-0",
		"/ui/groups":            "reporting",
		"/ui/groups/reporting":  "events",
		"/ui/subscriptions":     "audit",
		"/ui/static/console.js": "followRedrive",
	} {
		code, body, h := get(t, srv.URL+path)
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("%s: %d, want 200 with %q in\n%.600s", path, code, want, body)
		}
		if h.Get("Content-Security-Policy") == "" {
			t.Errorf("%s: no Content-Security-Policy", path)
		}
	}
	if code, body, _ := get(t, srv.URL+"/ui/queues/nosuch"); code != http.StatusNotFound || !strings.Contains(body, "QUEUE_NOT_FOUND") {
		t.Errorf("unknown queue: %d %.300s", code, body)
	}
	// By time: from a time before the first record, the first; after the last, none.
	if code, body, _ := get(t, srv.URL+"/ui/topics/events/0?time=2000-01-01T00:00"); code != http.StatusOK || !strings.Contains(body, "rec-0") {
		t.Errorf("partition from a time long ago: %d %.300s", code, body)
	}
	if code, body, _ := get(t, srv.URL+"/ui/topics/events/0?time=2999-01-01T00:00:00Z"); code != http.StatusOK || strings.Contains(body, "rec-") {
		t.Errorf("partition from a time to come: %d, want no records", code)
	}
	for _, bad := range []string{"/ui/topics/events/x", "/ui/topics/events/0?time=yesterday", "/ui/topics/events/0?offset=-1"} {
		if code, _, _ := get(t, srv.URL+bad); code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", bad, code)
		}
	}
	if code, _, _ := get(t, srv.URL+"/ui/topics/events/x"); code != http.StatusBadRequest {
		t.Errorf("bad partition: %d", code)
	}
	resp, err := http.PostForm(srv.URL+"/ui/queues/jobs-dlq/redrive", url.Values{})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST without an origin: %d, want 403", resp.StatusCode)
	}
	if q, _ := client.New(srv.URL).GetQueue(t.Context(), "jobs-dlq"); depthOf(q) != 1 {
		t.Errorf("the refused POST moved messages: dlq depth %d", depthOf(q))
	}
}

func depthOf(q *client.Queue) int64 {
	st := q.GetStats()
	return st.GetVisible() + st.GetInFlight() + st.GetDelayed()
}

// With --auth-file the console does not bypass it: without a token every
// page sends the browser to sign in, a wrong token is refused, and a
// token's pages show only what it may describe.
func TestConsoleNeedsAToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.yaml")
	admin, jobsOnly := "sl_console-admin-token", "sl_console-jobs-token"
	users := `users:
  - {name: admin, tokens: ["` + admin + `"]}
  - {name: jobs-reader, tokens: ["` + jobsOnly + `"]}
acls:
  - {user: admin, allow: [all], resources: ["*"]}
  - {user: jobs-reader, allow: [describe, consume], resources: ["queue:jobs"]}
`
	if err := os.WriteFile(path, []byte(users), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := sluicetest.Start(t, sluicetest.WithAuthFile(path))
	seed(t, client.New(srv.URL, client.WithToken(admin)))

	code, _, h := get(t, srv.URL+"/ui/queues")
	if code != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/ui/login") {
		t.Fatalf("no token: %d %q, want the sign-in page", code, h.Get("Location"))
	}
	login := func(token string) (int, *http.Cookie) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/ui/login", strings.NewReader(url.Values{"token": {token}, "next": {"/ui/queues"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", srv.URL)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		for _, c := range resp.Cookies() {
			return resp.StatusCode, c
		}
		return resp.StatusCode, nil
	}
	if code, ck := login("sl_wrong"); code != http.StatusUnauthorized || ck != nil {
		t.Errorf("wrong token: %d, cookie %v", code, ck)
	}
	code, ck := login(jobsOnly)
	if code != http.StatusSeeOther || ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
		t.Fatalf("sign in: %d %+v", code, ck)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/ui/queues", nil)
	req.AddCookie(ck)
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `<td><a href="/ui/queues/jobs">`) || strings.Count(string(b), "<tr>\n<td>") != 1 {
		t.Errorf("jobs-reader's queue list: %d, want jobs alone:\n%s", resp.StatusCode, b[strings.Index(string(b), "<h1>"):])
	}
	// The users page: the admin sees every user and rule and no secret; jobs-reader, who may
	// not describe the cluster, is refused it.
	_, adminCookie := login(admin)
	req, _ = http.NewRequest(http.MethodGet, srv.URL+"/ui/users", nil)
	req.AddCookie(adminCookie)
	resp, err = noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(b)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, "<td>jobs-reader</td>") || !strings.Contains(page, "<code>queue:jobs</code>") {
		t.Errorf("admin's users page: %d\n%s", resp.StatusCode, page)
	}
	for _, secret := range []string{admin, jobsOnly, "sha256:"} {
		if strings.Contains(page, secret) {
			t.Errorf("the users page shows a secret (%q)", secret)
		}
	}
	req, _ = http.NewRequest(http.MethodGet, srv.URL+"/ui/users", nil)
	req.AddCookie(ck)
	resp, err = noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("jobs-reader's users page: %d, want 403", resp.StatusCode)
	}
	req, _ = http.NewRequest(http.MethodGet, srv.URL+"/ui/queues/jobs-dlq", nil)
	req.AddCookie(ck)
	resp, err = noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("jobs-reader's look into jobs-dlq: %d, want 403", resp.StatusCode)
	}
}

// seed makes what the pages show: a queue with a message, its dead-letter
// queue with one dead letter, a topic with records, a group behind, and a
// subscription.
func seed(t *testing.T, c *client.Client) {
	t.Helper()
	ctx := t.Context()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.CreateQueue(ctx, "jobs-dlq", nil))
	must(c.CreateQueue(ctx, "jobs", &client.QueueConfig{DeadLetter: &client.DeadLetterPolicy{Queue: "jobs-dlq", MaxReceives: 1}}))
	must(c.Send(ctx, "jobs", []byte("poison")))
	msgs, err := c.Receive(ctx, "jobs")
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receive: %v %v", msgs, err)
	}
	if err := c.Nack(ctx, "jobs", msgs[0].GetReceipt(), 0, "cannot parse"); err != nil {
		t.Fatal(err)
	}
	must(c.Receive(ctx, "jobs")) // the second receive dead-letters it
	must(c.Send(ctx, "jobs", []byte("hello")))
	must(c.CreateTopic(ctx, "events", nil))
	must(c.CreateSubscription(ctx, "events", "audit", nil))
	must(c.Produce(ctx, "events", []*client.ProduceRecord{{Value: []byte("rec-0")}, {Value: []byte("rec-1")}}, nil))
	if err := c.CommitOffsets(ctx, "reporting", "", -1, []*client.CommittedOffset{{Topic: "events", Partition: 0, Offset: 1}}); err != nil {
		t.Fatal(err)
	}
}
