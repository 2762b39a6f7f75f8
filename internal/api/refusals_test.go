package api_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/sluicetest"
)

// What the native API refuses, and that a refusal changes nothing: a
// partition below -1, and a topic name reserved for the broker's internal
// topics.
func TestRefusedInputChangesNothing(t *testing.T) {
	srv := sluicetest.Start(t)
	post := func(path, body string) (int, string) {
		resp, err := http.Post(srv.URL+"/sluice.v1."+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post("TopicService/CreateTopic", `{"name":"t"}`); code != 200 {
		t.Fatalf("create t: %d %s", code, body)
	}
	for _, tc := range []struct{ path, body, want string }{
		{"TopicService/Produce", `{"topic":"t","records":[{"value":"YQ=="},{"value":"Yg==","partition":-2}]}`, "partition -2"},
		{"TopicService/CreateTopic", `{"name":"__consumer_offsets"}`, "reserved"},
		{"TopicService/CreateTopic", `{"name":"__mine"}`, "reserved"},
	} {
		code, body := post(tc.path, tc.body)
		if code != 400 || !strings.Contains(body, `"code":"invalid_argument"`) || !strings.Contains(body, tc.want) {
			t.Errorf("%s %s = %d %s; want 400 invalid_argument mentioning %q", tc.path, tc.body, code, body, tc.want)
		}
	}
	// Nothing was stored, nothing was created.
	if _, body := post("TopicService/DescribeTopic", `{"name":"t"}`); strings.Contains(body, `"highWatermark":"1"`) || strings.Contains(body, `"highWatermark":"2"`) {
		t.Errorf("a refused produce stored records: %s", body)
	}
	if _, body := post("TopicService/ListTopics", `{}`); strings.Contains(body, "__") {
		t.Errorf("a reserved topic was created: %s", body)
	}
}
