package sqs

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// BenchmarkHandlerRoundTrip is W2's work for ten messages through the
// handler alone (no network, no signing; a broker on an in-memory FS): ten
// 1 KiB SendMessage calls, one ReceiveMessage of 10, one
// DeleteMessageBatch of their receipts. ns/op and allocs/op are for the
// ten messages. It needs only what main has too, so the same file measures
// either tree.
func BenchmarkHandlerRoundTrip(b *testing.B) {
	br, err := broker.Open(broker.Options{Dir: "/bench", FS: vfs.NewMem(), Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	if _, err := br.CreateQueue(broker.QueueSettings{Name: "q"}); err != nil {
		b.Fatal(err)
	}
	h := NewHandler(br, Config{AdvertisedURL: "http://sqs.test", Logger: quiet()})
	const url = "http://sqs.test/000000000000/q"
	send := []byte(`{"MessageBody":"` + strings.Repeat("x", 1024) + `","QueueUrl":"` + url + `"}`)
	recv := []byte(`{"MaxNumberOfMessages":10,"QueueUrl":"` + url + `","WaitTimeSeconds":0}`)
	do := func(action string, body []byte) []byte {
		r := httptest.NewRequest("POST", "http://sqs.test/", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/x-amz-json-1.0")
		r.Header.Set("X-Amz-Target", "AmazonSQS."+action)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code != 200 {
			b.Fatalf("%s: %d %s", action, rec.Code, rec.Body)
		}
		return rec.Body.Bytes()
	}
	b.ReportAllocs()
	for b.Loop() {
		for range 10 {
			do("SendMessage", send)
		}
		var out struct {
			Messages []struct{ ReceiptHandle string }
		}
		if err := json.Unmarshal(do("ReceiveMessage", recv), &out); err != nil || len(out.Messages) != 10 {
			b.Fatalf("received %d: %v", len(out.Messages), err)
		}
		del := `{"Entries":[`
		for i, m := range out.Messages {
			if i > 0 {
				del += ","
			}
			del += `{"Id":"` + strconv.Itoa(i) + `","ReceiptHandle":"` + m.ReceiptHandle + `"}`
		}
		do("DeleteMessageBatch", []byte(del+`],"QueueUrl":"`+url+`"}`))
	}
}
