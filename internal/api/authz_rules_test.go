package api

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// Every RPC of every service has a line in requirements: one added without
// it is refused in production (policy unknown) and fails here first.
func TestEveryRPCHasARule(t *testing.T) {
	files := []protoreflect.FileDescriptor{
		sluicev1.File_sluice_v1_queue_proto, sluicev1.File_sluice_v1_topic_proto,
		sluicev1.File_sluice_v1_group_proto, sluicev1.File_sluice_v1_deadletter_proto,
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
