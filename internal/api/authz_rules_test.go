package api

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/sluice-mq/sluice/internal/auth"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// Every RPC of every service has a line in requirements: one added without
// it is refused in production (policy unknown) and fails here first.
func TestEveryRPCHasARule(t *testing.T) {
	files := []protoreflect.FileDescriptor{
		sluicev1.File_sluice_v1_queue_proto, sluicev1.File_sluice_v1_topic_proto,
		sluicev1.File_sluice_v1_group_proto, sluicev1.File_sluice_v1_deadletter_proto,
		sluicev1.File_sluice_v1_stream_proto,
	}
	n := 0
	for _, f := range files {
		for i := 0; i < f.Services().Len(); i++ {
			svc := f.Services().Get(i)
			for j := 0; j < svc.Methods().Len(); j++ {
				m := svc.Methods().Get(j)
				mt, err := protoregistry.GlobalTypes.FindMessageByName(m.Input().FullName())
				if err != nil {
					t.Fatal(err)
				}
				n++
				if _, pol := requirements(mt.New().Interface()); pol == unknown {
					t.Errorf("%s/%s has no access rule in requirements", svc.FullName(), m.Name())
				}
			}
		}
	}
	if n < 40 {
		t.Fatalf("found only %d RPCs; the descriptors were not read", n)
	}
}

// A subscription is its topic's resource; a queue is its own.
func TestQueueNamesMapToResources(t *testing.T) {
	for name, want := range map[string]string{"orders": "queue:orders", "events/billing": "topic:events"} {
		if got := queueRes(name).String(); got != want {
			t.Errorf("queueRes(%q) = %s, want %s", name, got, want)
		}
	}
	needs, _ := requirements(&sluicev1.StartRedriveRequest{DeadLetterQueue: "dlq", DestinationQueue: "orders"})
	if len(needs) != 2 || needs[0].String() != "redrive queue:dlq" || needs[1].String() != "produce queue:orders" {
		t.Errorf("StartRedrive needs %v", needs)
	}
	if _, pol := requirements(&sluicev1.QueueConfig{}); pol != unknown {
		t.Error("a message that is no request has a rule")
	}
}

// BenchmarkAuthenticateAuthorize is what authentication adds to a call:
// the token's hash looked up, then 101 rules scanned (the match last).
//
//	go test -run '^$' -bench AuthenticateAuthorize ./internal/api/
func BenchmarkAuthenticateAuthorize(b *testing.B) {
	f := &auth.File{Users: []auth.User{{Name: "alice", Tokens: []string{auth.HashToken("sl_t")}}}}
	for i := range 100 {
		f.ACLs = append(f.ACLs, auth.Rule{User: "other", Allow: []auth.Operation{auth.Produce},
			Resources: []auth.Pattern{auth.Pattern(fmt.Sprintf("queue:q%d", i))}})
	}
	f.ACLs = append(f.ACLs, auth.Rule{User: "alice", Allow: []auth.Operation{auth.Produce}, Resources: []auth.Pattern{"queue:orders*"}})
	store, err := auth.NewStatic(f, auth.Options{})
	if err != nil {
		b.Fatal(err)
	}
	a := New(Options{Auth: store})
	h := http.Header{"Authorization": []string{"Bearer sl_t"}}
	msg := &sluicev1.SendRequest{Queue: "orders"}
	for b.Loop() {
		p, err := a.authenticate(context.Background(), h, "", "")
		if err != nil {
			b.Fatal(err)
		}
		if err := a.authorize(p, msg, "", ""); err != nil {
			b.Fatal(err)
		}
	}
}
