package sqs

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
)

// AddPermission grants, RemovePermission takes back exactly what it
// granted, and DeleteQueue takes a queue's grants with it; each is a real
// edit of the users file that the next request sees.
func TestAddRemovePermissionEditTheUsersFile(t *testing.T) {
	for _, jsonProto := range []bool{false, true} {
		a := newAuthHarness(t)
		if _, err := a.b.CreateQueue(broker.QueueSettings{Name: "orders"}); err != nil {
			t.Fatal(err)
		}
		const url = "http://sqs.test/000000000000/orders"
		do := func(cred aws.Credentials, action string, params map[string]string) *httptest.ResponseRecorder {
			return a.serve(sign(t, request(jsonProto, action, params), cred, a.clock()))
		}
		add := func(label string, accounts, actions []string) *httptest.ResponseRecorder {
			p := map[string]string{"QueueUrl": url, "Label": label}
			var r *httptest.ResponseRecorder
			if jsonProto {
				body := `{"QueueUrl":"` + url + `","Label":"` + label + `","AWSAccountIds":["` + strings.Join(accounts, `","`) +
					`"],"Actions":["` + strings.Join(actions, `","`) + `"]}`
				req := request(true, "AddPermission", nil)
				req.Body, req.ContentLength = readCloser{bytes.NewReader([]byte(body))}, int64(len(body))
				r = a.serve(sign(t, req, alice, a.clock()))
			} else {
				for i, id := range accounts {
					p["AWSAccountId."+itoa(i+1)] = id
				}
				for i, n := range actions {
					p["ActionName."+itoa(i+1)] = n
				}
				r = do(alice, "AddPermission", p)
			}
			return r
		}
		receive := map[string]string{"QueueUrl": url}
		if rec := do(bob, "ReceiveMessage", receive); rec.Code != 403 {
			t.Fatalf("bob receives before any grant: %d", rec.Code)
		}
		if rec := add("readers", []string{"bob", "AKIDCAROL"}, []string{"ReceiveMessage", "GetQueueAttributes"}); rec.Code != 200 {
			t.Fatalf("AddPermission: %d %s", rec.Code, rec.Body)
		}
		if rec := do(bob, "ReceiveMessage", receive); rec.Code != 200 {
			t.Fatalf("bob receives after the grant: %d %s", rec.Code, rec.Body)
		}
		if rec := do(bob, "PurgeQueue", receive); rec.Code != 403 {
			t.Fatalf("bob purges with a receive grant: %d", rec.Code)
		}
		f, err := auth.ReadFile(a.path)
		if err != nil {
			t.Fatal(err)
		}
		var labelled []string
		for _, r := range f.ACLs {
			if r.Label != "" {
				labelled = append(labelled, r.User+" "+string(r.Resources[0])+" "+r.Label)
			}
		}
		if strings.Join(labelled, ",") != "bob queue:orders readers,carol queue:orders readers" {
			t.Fatalf("labelled rules %v", labelled)
		}
		for _, bad := range []struct {
			label    string
			accounts []string
			actions  []string
		}{
			{"readers", []string{"bob"}, []string{"SendMessage"}},        // label taken
			{"other", []string{"123456789012"}, []string{"SendMessage"}}, // nobody
			{"other", []string{"bob"}, []string{"Teleport"}},             // no such action
		} {
			if rec := add(bad.label, bad.accounts, bad.actions); rec.Code != 400 || errorCode(t, jsonProto, rec) != "InvalidParameterValue" {
				t.Fatalf("AddPermission %v: %d %s", bad, rec.Code, rec.Body)
			}
		}
		if rec := add("readers2", []string{"bob"}, []string{"SendMessage"}); rec.Code != 200 {
			t.Fatal(rec.Body)
		}
		if rec := do(alice, "RemovePermission", map[string]string{"QueueUrl": url, "Label": "readers"}); rec.Code != 200 {
			t.Fatalf("RemovePermission: %d %s", rec.Code, rec.Body)
		}
		if rec := do(bob, "ReceiveMessage", receive); rec.Code != 403 {
			t.Fatalf("bob receives after RemovePermission: %d", rec.Code)
		}
		if rec := do(bob, "SendMessage", map[string]string{"QueueUrl": url, "MessageBody": "x"}); rec.Code != 200 {
			t.Fatalf("the other label's grant went too: %d %s", rec.Code, rec.Body)
		}
		if rec := do(alice, "RemovePermission", map[string]string{"QueueUrl": url, "Label": "readers"}); rec.Code != 400 {
			t.Fatalf("RemovePermission of a removed label: %d", rec.Code)
		}
		if rec := do(bob, "AddPermission", map[string]string{"QueueUrl": url, "Label": "mine", "AWSAccountId.1": "bob", "ActionName.1": "*"}); rec.Code != 403 {
			t.Fatalf("bob grants himself: %d", rec.Code)
		}
		if rec := do(alice, "DeleteQueue", map[string]string{"QueueUrl": url}); rec.Code != 200 {
			t.Fatal(rec.Body)
		}
		f, _ = auth.ReadFile(a.path)
		for _, r := range f.ACLs {
			if r.Label != "" {
				t.Fatalf("a deleted queue's grant stays: %+v", r)
			}
		}
		if len(f.ACLs) != 3 { // testUsersFile's alice, carol and dave
			t.Fatalf("hand-written rules changed: %+v", f.ACLs)
		}
	}
}

// CancelMessageMoveTask is checked against the task's source queue.
func TestCancelMoveTaskIsAuthorized(t *testing.T) {
	a := newAuthHarness(t)
	if _, err := a.b.CreateQueue(broker.QueueSettings{Name: "dlq"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.b.CreateQueue(broker.QueueSettings{Name: "src", DeadLetterQueue: "dlq", MaxReceives: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.b.Send(t.Context(), "dlq", []broker.SendInput{{Body: []byte("a")}, {Body: []byte("b")}, {Body: []byte("c")}}); err != nil {
		t.Fatal(err)
	}
	task, err := a.b.StartRedrive(broker.RedriveRequest{Source: "dlq", Destination: "src", RatePerSecond: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rec := a.serve(sign(t, request(true, "CancelMessageMoveTask", map[string]string{"TaskHandle": task.ID}), bob, a.clock())); rec.Code != 403 {
		t.Fatalf("bob cancels: %d %s", rec.Code, rec.Body)
	}
	if rec := a.serve(sign(t, request(true, "CancelMessageMoveTask", map[string]string{"TaskHandle": task.ID}), alice, a.clock())); rec.Code != 200 {
		t.Fatalf("alice cancels: %d %s", rec.Code, rec.Body)
	}
}
