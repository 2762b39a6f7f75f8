package sluicev1_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
	"github.com/sluice-mq/sluice/proto/sluice/v1/sluicev1connect"
)

// TestSchemaCoversTheIssues fails if an operation the queue, stream and
// binary issues ask for disappears from the schema.
func TestSchemaCoversTheIssues(t *testing.T) {
	want := map[protoreflect.FileDescriptor]map[string][]string{
		sluicev1.File_sluice_v1_queue_proto: {"QueueService": {
			"CreateQueue", "GetQueue", "ListQueues", "UpdateQueue", "DeleteQueue", "PurgeQueue",
			"Send", "SendBatch", "Receive", "Consume", "Ack", "AckBatch", "Extend", "Nack"}},
		sluicev1.File_sluice_v1_deadletter_proto: {"DeadLetterService": {
			"ListDeadLetterSources", "StartRedrive", "GetRedrive", "ListRedrives", "CancelRedrive"}},
		sluicev1.File_sluice_v1_topic_proto: {"TopicService": {
			"CreateTopic", "ListTopics", "DescribeTopic", "DeleteTopic", "AddPartitions", "InitProducer",
			"Produce", "Fetch", "ListOffsets", "CreateSubscription", "GetSubscription", "ListSubscriptions", "DeleteSubscription"}},
		sluicev1.File_sluice_v1_group_proto: {"GroupService": {
			"JoinGroup", "Heartbeat", "LeaveGroup", "CommitOffsets", "FetchOffsets", "ListGroups", "DescribeGroup", "ResetOffsets"}},
	}
	for file, services := range want {
		for svcName, methods := range services {
			svc := file.Services().ByName(protoreflect.Name(svcName))
			if svc == nil {
				t.Errorf("%s: no service %s", file.Path(), svcName)
				continue
			}
			var got []string
			for i := range svc.Methods().Len() {
				got = append(got, string(svc.Methods().Get(i).Name()))
			}
			for _, m := range methods {
				if !slices.Contains(got, m) {
					t.Errorf("%s lacks %s", svcName, m)
				}
			}
		}
	}
	consume := sluicev1.File_sluice_v1_queue_proto.Services().ByName("QueueService").Methods().ByName("Consume")
	if !consume.IsStreamingServer() || consume.IsStreamingClient() {
		t.Error("Consume must be server-streaming")
	}
}

// TestConnectJSONOverPlainHTTP checks the curl path docs/api.md promises:
// a JSON POST to /sluice.v1.<Service>/<Method> reaches the handler and an
// error comes back as Connect's JSON error with a code. The generated
// "unimplemented" handler stands in for the broker.
func TestConnectJSONOverPlainHTTP(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle(sluicev1connect.NewQueueServiceHandler(sluicev1connect.UnimplementedQueueServiceHandler{}))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, err := http.Post(srv.URL+sluicev1connect.QueueServiceSendProcedure, "application/json",
		strings.NewReader(`{"queue":"emails","message":{"body":"aGVsbG8="}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var e struct{ Code string }
	if err := json.Unmarshal(body, &e); err != nil || e.Code != "unimplemented" {
		t.Fatalf("status %d body %s: want a Connect JSON error with code unimplemented", resp.StatusCode, body)
	}
	if sluicev1connect.QueueServiceSendProcedure != "/sluice.v1.QueueService/Send" {
		t.Errorf("procedure path %q changed; docs/api.md and curl users depend on it", sluicev1connect.QueueServiceSendProcedure)
	}
}

// TestDocsCurlExamplesMatchSchema parses every curl example in docs/api.md
// strictly (unknown fields are errors, unlike the server's lenient JSON) as
// the request message of the procedure it calls, so the examples cannot
// drift from the schema.
func TestDocsCurlExamplesMatchSchema(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`curl -H "\$J" -d '([^']*)'\s*(?:\\\s*)?\$S\.(\w+)/(\w+)`)
	matches := re.FindAllStringSubmatch(string(doc), -1)
	if len(matches) < 20 {
		t.Fatalf("found %d curl examples; the pattern or the doc changed", len(matches))
	}
	for _, m := range matches {
		body, svc, method := m[1], m[2], m[3]
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName("sluice.v1." + svc))
		if err != nil {
			t.Errorf("%s/%s: unknown service", svc, method)
			continue
		}
		md := d.(protoreflect.ServiceDescriptor).Methods().ByName(protoreflect.Name(method))
		if md == nil {
			t.Errorf("%s/%s: unknown method", svc, method)
			continue
		}
		req := dynamicpb.NewMessage(md.Input())
		if err := protojson.Unmarshal([]byte(body), req); err != nil {
			t.Errorf("%s/%s: body %s: %v", svc, method, body, err)
		}
	}
}
