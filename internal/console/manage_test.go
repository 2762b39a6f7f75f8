package console_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/sluicetest"
)

// post submits a console form as the browser does (same origin) and returns the status,
// the redirect target and the body.
func post(t *testing.T, base, path string, form url.Values) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(b)
}

// The forms that change things do exactly what they say through the API, refuse what
// the API refuses (shown as the page's error, nothing changed), and ask for the name
// before purging or deleting.
func TestManageForms(t *testing.T) {
	srv := sluicetest.Start(t)
	c := client.New(srv.URL)
	ctx := t.Context()
	steps := []struct {
		name, path string
		form       url.Values
		status     int
		location   string // on success
		errText    string // on refusal, in the page
	}{
		{"a dead-letter queue that does not exist", "/ui/queues", url.Values{"name": {"orders"}, "dlq": {"orders-dlq"}, "max_receives": {"3"}},
			http.StatusNotFound, "", "orders-dlq"},
		{"create a dead-letter queue", "/ui/queues", url.Values{"name": {"orders-dlq"}}, http.StatusSeeOther, "/ui/queues/orders-dlq?done=queue-created", ""},
		{"create a queue", "/ui/queues", url.Values{"name": {"orders"}, "visibility": {"45"}, "dlq": {"orders-dlq"}, "max_receives": {"3"}},
			http.StatusSeeOther, "/ui/queues/orders?done=queue-created", ""},
		{"a queue of that name exists", "/ui/queues", url.Values{"name": {"orders"}}, http.StatusBadRequest, "", "exists"},
		{"no name", "/ui/queues", url.Values{"name": {" "}}, http.StatusBadRequest, "", "name the queue"},
		{"a DLQ without receives", "/ui/queues", url.Values{"name": {"x"}, "dlq": {"d"}}, http.StatusBadRequest, "", "max_receives"},
		{"seconds that are not", "/ui/queues", url.Values{"name": {"x"}, "visibility": {"soon"}}, http.StatusBadRequest, "", "not a number of seconds"},
		{"settings the API refuses", "/ui/queues/orders/settings", url.Values{"visibility": {"90"}, "retention": {"3600"}},
			http.StatusBadRequest, "", "must not exceed the retention"},
		{"change settings", "/ui/queues/orders/settings", url.Values{"visibility": {"90"}, "retention": {"86400"}, "delay": {"0"}, "max_message_bytes": {"2048"}},
			http.StatusSeeOther, "/ui/queues/orders?done=queue-updated", ""},
		{"settings of no queue", "/ui/queues/nosuch/settings", url.Values{"visibility": {"1"}}, http.StatusNotFound, "", "QUEUE_NOT_FOUND"},
		{"purge unconfirmed", "/ui/queues/orders/purge", url.Values{"confirm": {"order"}}, http.StatusBadRequest, "", `type &#34;orders&#34; to confirm`},
		{"purge", "/ui/queues/orders/purge", url.Values{"confirm": {"orders"}}, http.StatusSeeOther, "/ui/queues/orders?done=queue-purged&n=2", ""},
		{"create a topic", "/ui/topics", url.Values{"name": {"clicks"}, "partitions": {"3"}, "retention": {"86400"}},
			http.StatusSeeOther, "/ui/topics/clicks?done=topic-created", ""},
		{"delete a topic unconfirmed", "/ui/topics/clicks/delete", url.Values{}, http.StatusBadRequest, "", "to confirm"},
		{"delete a topic", "/ui/topics/clicks/delete", url.Values{"confirm": {"clicks"}}, http.StatusSeeOther, "/ui/topics?done=topic-deleted", ""},
		{"delete the queue", "/ui/queues/orders/delete", url.Values{"confirm": {"orders"}}, http.StatusSeeOther, "/ui/queues?done=queue-deleted", ""},
	}
	for _, s := range steps {
		if s.name == "purge unconfirmed" { // two messages to purge, and one refused purge first
			for _, b := range []string{"a", "b"} {
				if _, err := c.Send(ctx, "orders", []byte(b)); err != nil {
					t.Fatal(err)
				}
			}
		}
		code, loc, body := post(t, srv.URL, s.path, s.form)
		if code != s.status || (s.location != "" && loc != s.location) || (s.errText != "" && !strings.Contains(body, s.errText)) {
			t.Fatalf("%s: %d %q, want %d %q %q in\n%.3000s", s.name, code, loc, s.status, s.location, s.errText, body)
		}
		switch s.name {
		case "create a queue":
			q, err := c.GetQueue(ctx, "orders")
			if err != nil || q.GetConfig().GetVisibilityTimeout().AsDuration() != 45*time.Second ||
				q.GetConfig().GetDeadLetter().GetQueue() != "orders-dlq" || q.GetConfig().GetDeadLetter().GetMaxReceives() != 3 {
				t.Fatalf("created queue: %v %v", q.GetConfig(), err)
			}
		case "settings the API refuses":
			if q, _ := c.GetQueue(ctx, "orders"); q.GetConfig().GetVisibilityTimeout().AsDuration() != 45*time.Second {
				t.Fatalf("a refused settings form changed the queue: %v", q.GetConfig())
			}
		case "change settings":
			q, _ := c.GetQueue(ctx, "orders")
			cfg := q.GetConfig()
			if cfg.GetVisibilityTimeout().AsDuration() != 90*time.Second || cfg.GetRetention().AsDuration() != 24*time.Hour ||
				cfg.GetMaxMessageBytes() != 2048 || cfg.GetDeadLetter() != nil {
				t.Fatalf("settings after the form: %v (the emptied dead-letter queue must be removed)", cfg)
			}
		case "purge unconfirmed":
			if q, _ := c.GetQueue(ctx, "orders"); depthOf(q) != 2 {
				t.Fatalf("an unconfirmed purge deleted messages: depth %d", depthOf(q))
			}
		case "create a topic":
			tp, err := c.DescribeTopic(ctx, "clicks")
			if err != nil || tp.GetConfig().GetPartitions() != 3 || tp.GetConfig().GetRetention().AsDuration() != 24*time.Hour {
				t.Fatalf("created topic: %v %v", tp.GetConfig(), err)
			}
		}
	}
	if _, err := c.GetQueue(ctx, "orders"); err == nil {
		t.Error("orders still exists after the delete form")
	}
	// The notice after a redirect is one of the console's own texts, never the query's.
	if _, body, _ := get(t, srv.URL+"/ui/queues?done=queue-deleted"); !strings.Contains(body, "Queue deleted.") {
		t.Error("no notice after the delete's redirect")
	}
	if _, body, _ := get(t, srv.URL+"/ui/queues?done=%3Cb%3Ehacked"); strings.Contains(body, "hacked") {
		t.Error("a notice taken from the query")
	}
	// The overview shows the node's disk headroom and fdatasync latency (a send above
	// made at least one).
	if code, body, _ := get(t, srv.URL+"/ui/"); code != http.StatusOK || !strings.Contains(body, `id="node-health"`) ||
		!strings.Contains(body, "disk free") || !strings.Contains(body, "fdatasync p99") || strings.Contains(body, "<b>0</b>fdatasyncs") ||
		strings.Contains(body, "<b>–</b>fdatasync p50") {
		t.Errorf("overview without the node's health: %d %.3000s", code, body)
	}
	// Without --auth-file the users page says authentication is off.
	if code, body, _ := get(t, srv.URL+"/ui/users"); code != http.StatusOK || !strings.Contains(body, "Authentication is off") {
		t.Errorf("/ui/users without auth: %d %.400s", code, body)
	}
	// A single node's cluster page says so rather than failing.
	if code, body, _ := get(t, srv.URL+"/ui/cluster"); code != http.StatusOK || !strings.Contains(body, "single node") {
		t.Errorf("/ui/cluster on a single node: %d %.400s", code, body)
	}
}
