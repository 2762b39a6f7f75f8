package sqs

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
)

// A panic in an action is a bug, but it must not take the process down:
// the handler answers InternalFailure in the request's protocol.
func TestPanicBecomesInternalFailure(t *testing.T) {
	register("TestPanic", func(*Handler, *call) (any, error) { panic("boom") })
	defer delete(actions, "TestPanic")
	h := NewHandler(nil, Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})

	req := httptest.NewRequest("POST", "/", strings.NewReader("{}"))
	req.Header.Set("X-Amz-Target", "AmazonSQS.TestPanic")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var body struct {
		Type string `json:"__type"`
	}
	if rec.Code != 500 || json.Unmarshal(rec.Body.Bytes(), &body) != nil || body.Type != "com.amazonaws.sqs#InternalFailure" ||
		rec.Header().Get("x-amzn-query-error") != "InternalFailure;Receiver" {
		t.Fatalf("JSON: HTTP %d %s %v", rec.Code, rec.Body, rec.Header())
	}

	req = httptest.NewRequest("POST", "/", strings.NewReader("Action=TestPanic"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 500 || !strings.Contains(rec.Body.String(), "<Code>InternalFailure</Code>") || !strings.Contains(rec.Body.String(), "<Type>Receiver</Type>") {
		t.Fatalf("query: HTTP %d %s", rec.Code, rec.Body)
	}
}
