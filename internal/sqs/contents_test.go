package sqs_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// A body or attribute value with characters SQS forbids is refused with
// InvalidMessageContents (InvalidParameterValue for attributes), in both
// protocols, and nothing is stored; before, encoding/json rewrote invalid
// UTF-8 and unpaired surrogates to U+FFFD and the message went in changed.
func TestForbiddenCharactersAreRefused(t *testing.T) {
	e := newEnv(t)
	q := e.createQueue("contents", nil)
	sendJSON := func(body string) (int, string) {
		req, _ := http.NewRequestWithContext(e.ctx, "POST", e.endpoint, strings.NewReader(body))
		req.Header.Set("X-Amz-Target", "AmazonSQS.SendMessage")
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		return do(t, req)
	}
	sendQuery := func(v url.Values) (int, string) {
		v.Set("Action", "SendMessage")
		v.Set("QueueUrl", q)
		req, _ := http.NewRequestWithContext(e.ctx, "POST", e.endpoint, strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return do(t, req)
	}
	for _, tc := range []struct {
		name, body, want string
	}{
		{"lone surrogate", `{"QueueUrl":"` + q + `","MessageBody":"a\ud800b"}`, "InvalidMessageContents"},
		{"invalid utf-8", "{\"QueueUrl\":\"" + q + "\",\"MessageBody\":\"a\xffb\"}", "InvalidMessageContents"},
		{"outside the set", `{"QueueUrl":"` + q + `","MessageBody":"bell \u0007"}`, "InvalidMessageContents"},
		{"attribute", `{"QueueUrl":"` + q + `","MessageBody":"ok","MessageAttributes":{"a":{"DataType":"String","StringValue":"\udfff"}}}`, "InvalidParameterValue"},
	} {
		if code, got := sendJSON(tc.body); code != 400 || !strings.Contains(got, tc.want) {
			t.Errorf("JSON, %s: %d %s; want 400 %s", tc.name, code, got, tc.want)
		}
	}
	if code, got := sendQuery(url.Values{"MessageBody": {"a\xffb"}}); code != 400 || !strings.Contains(got, "InvalidMessageContents") {
		t.Errorf("query, invalid utf-8: %d %s", code, got)
	}
	if code, got := sendJSON(`{"QueueUrl":"` + q + `","MessageBody":"fine \ud83d\ude00 \ufffd"}`); code != 200 {
		t.Fatalf("a valid body was refused: %d %s", code, got)
	}
	st, err := e.b.QueueStats("contents")
	if err != nil || st.Sent != 1 {
		t.Fatalf("stored %d messages (%v), want only the valid one", st.Sent, err)
	}
}

func do(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
