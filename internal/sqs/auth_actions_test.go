package sqs

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
)

// actionParams are parameters that reach each action's queue check.
func actionParams(action string) map[string]string {
	const url = "http://sqs.test/000000000000/q"
	const arn = "arn:aws:sqs:us-east-1:000000000000:q"
	switch action {
	case "CreateQueue", "GetQueueUrl":
		return map[string]string{"QueueName": "q"}
	case "StartMessageMoveTask", "ListMessageMoveTasks":
		return map[string]string{"SourceArn": arn}
	}
	return map[string]string{"QueueUrl": url}
}

// Every action a principal without rights sends is refused with
// AccessDenied before it touches the queue, in both protocols; ListQueues
// shows nothing. A new action that is not placed in actionOps fails here.
func TestEveryActionIsAuthorized(t *testing.T) {
	for _, jsonProto := range []bool{false, true} {
		a := newAuthHarness(t)
		if _, err := a.b.CreateQueue(broker.QueueSettings{Name: "q"}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.b.Send(t.Context(), "q", []broker.SendInput{{Body: []byte("kept")}}); err != nil {
			t.Fatal(err)
		}
		denied := 0
		for _, action := range actionNames() {
			switch action {
			case "TestPanic":
				continue
			case "CancelMessageMoveTask": // checked on the task's source: TestCancelMoveTaskIsAuthorized
				continue
			}
			if _, ok := actionOps[action]; !ok && action != "ListQueues" {
				t.Errorf("%s is not in actionOps", action)
			}
			rec := a.serve(sign(t, request(jsonProto, action, actionParams(action)), bob, a.clock()))
			if action == "ListQueues" {
				if rec.Code != 200 || strings.Contains(rec.Body.String(), "000000000000/q") {
					t.Errorf("ListQueues as bob: %d %s", rec.Code, rec.Body)
				}
				continue
			}
			denied++
			if code := errorCode(t, jsonProto, rec); code != "AccessDenied" || rec.Code != 403 {
				t.Errorf("json=%v %s as bob: %d %s, want 403 AccessDenied", jsonProto, action, rec.Code, rec.Body)
			}
		}
		if n := a.failures(auth.ReasonDenied); n != denied {
			t.Errorf("denials counted %d, want %d", n, denied)
		}
		st, err := a.b.QueueStats("q")
		if err != nil || st.Visible != 1 || st.InFlight != 0 {
			t.Fatalf("queue q after refused requests: %+v %v", st, err)
		}
		if qs := a.b.ListQueues(""); len(qs) != 1 {
			t.Fatalf("queues %v", qs)
		}
	}
}

// carol may send to "orders" and nothing else: the rules apply per
// operation and per queue, describe is implied by produce, and ListQueues
// shows only what she may describe.
func TestAuthorizationPerOperation(t *testing.T) {
	a := newAuthHarness(t)
	for _, n := range []string{"orders", "other"} {
		if _, err := a.b.CreateQueue(broker.QueueSettings{Name: n}); err != nil {
			t.Fatal(err)
		}
	}
	try := func(action string, params map[string]string) *httptest.ResponseRecorder {
		return a.serve(sign(t, request(true, action, params), carol, a.clock()))
	}
	orders := map[string]string{"QueueUrl": "http://sqs.test/000000000000/orders", "MessageBody": "m"}
	other := map[string]string{"QueueUrl": "http://sqs.test/000000000000/other", "MessageBody": "m"}
	for _, c := range []struct {
		action string
		params map[string]string
		status int
	}{
		{"SendMessage", orders, 200},
		{"SendMessage", other, 403},
		{"ReceiveMessage", orders, 403},
		{"PurgeQueue", orders, 403},
		{"GetQueueAttributes", orders, 200},
		{"GetQueueUrl", map[string]string{"QueueName": "orders"}, 200},
		{"GetQueueUrl", map[string]string{"QueueName": "other"}, 403},
		{"GetQueueUrl", map[string]string{"QueueName": "missing"}, 403}, // not QueueDoesNotExist: no probing
		{"CreateQueue", map[string]string{"QueueName": "new"}, 403},
	} {
		if rec := try(c.action, c.params); rec.Code != c.status {
			t.Errorf("%s %v: %d %s, want %d", c.action, c.params, rec.Code, rec.Body, c.status)
		}
	}
	rec := try("ListQueues", nil)
	var out struct{ QueueUrls []string }
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || len(out.QueueUrls) != 1 || !strings.HasSuffix(out.QueueUrls[0], "/orders") {
		t.Fatalf("ListQueues as carol: %s", rec.Body)
	}
}

// A redrive policy pours dead letters into its target, so naming one needs
// produce on it.
func TestRedrivePolicyNeedsProduceOnTarget(t *testing.T) {
	a := newAuthHarness(t)
	if err := os.WriteFile(a.path, []byte(testUsersFile+"  - {user: carol, allow: [create, alter], resources: [\"queue:mine\"]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.store.Reload(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"dlq", "orders"} {
		if _, err := a.b.CreateQueue(broker.QueueSettings{Name: n}); err != nil {
			t.Fatal(err)
		}
	}
	policy := func(target string) string {
		return `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:` + target + `","maxReceiveCount":3}`
	}
	create := func(target string) int {
		body, _ := json.Marshal(map[string]any{"QueueName": "mine", "Attributes": map[string]string{"RedrivePolicy": policy(target)}})
		r := request(true, "CreateQueue", nil)
		r.Body, r.ContentLength = readCloser{bytes.NewReader(body)}, int64(len(body))
		return a.serve(sign(t, r, carol, a.clock())).Code
	}
	if code := create("dlq"); code != 403 {
		t.Fatalf("redrive into a queue carol may not produce to: %d", code)
	}
	if code := create("orders"); code != 200 {
		t.Fatalf("redrive into a queue carol may produce to: %d", code)
	}
}

// A subscription read over SQS is authorized by its topic's rules, as in
// the native API: dave (consume on topic events) reads events/audit; alice
// (every right on every queue, none on topics) may not.
func TestSubscriptionAuthorizedByTopic(t *testing.T) {
	a := newAuthHarness(t)
	if _, err := a.b.CreateTopic(broker.TopicSettings{Name: "events", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.b.CreateSubscription(broker.SubscriptionSettings{Topic: "events", Name: "audit"}); err != nil {
		t.Fatal(err)
	}
	params := map[string]string{"QueueUrl": "http://sqs.test/000000000000/events%2Faudit"}
	if rec := a.serve(sign(t, request(true, "ReceiveMessage", params), dave, a.clock())); rec.Code != 200 {
		t.Errorf("dave: %d %s, want 200", rec.Code, rec.Body)
	}
	if rec := a.serve(sign(t, request(true, "ReceiveMessage", params), alice, a.clock())); rec.Code != 403 {
		t.Errorf("alice: %d %s, want 403 (queue rights do not cover a topic)", rec.Code, rec.Body)
	}
}
