package sqs

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// httpBench is the handler behind a real net/http server on loopback, with
// a keep-alive client: what a request costs with net/http's reading and
// writing (one read and one write a request), which the recorder-based
// benchmarks leave out. The client's CPU is in the figures too; it is
// net/http's, a fraction of aws-sdk-go-v2's.
type httpBench struct {
	br  *broker.Broker
	srv *httptest.Server
	cl  *http.Client
	url string
}

func newHTTPBench(b *testing.B) *httpBench {
	br, err := broker.Open(broker.Options{Dir: "/bench", FS: vfs.NewMem(), Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := br.CreateQueue(broker.QueueSettings{Name: "q"}); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(NewHandler(br, Config{AdvertisedURL: "http://sqs.test", Logger: quiet()}))
	b.Cleanup(func() { srv.Close(); _ = br.Close() })
	cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	return &httpBench{br: br, srv: srv, cl: cl, url: "http://sqs.test/000000000000/q"}
}

func (hb *httpBench) do(b *testing.B, action string, body []byte) []byte {
	r, _ := http.NewRequest("POST", hb.srv.URL+"/", bytes.NewReader(body))
	r.Header.Set("Content-Type", jsonContentType)
	r.Header.Set("X-Amz-Target", "AmazonSQS."+action)
	resp, err := hb.cl.Do(r)
	if err != nil {
		b.Fatal(err)
	}
	out, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("%s: %d %s %v", action, resp.StatusCode, out, err)
	}
	return out
}

// BenchmarkHTTPSendMessage is one 1 KiB SendMessage over HTTP, 16 callers
// at once (W2's senders in small).
func BenchmarkHTTPSendMessage(b *testing.B) {
	hb := newHTTPBench(b)
	body := []byte(`{"MessageBody":"` + strings.Repeat("x", 1024) + `","QueueUrl":"` + hb.url + `"}`)
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer() // opening the broker writes its disk headroom: seconds on vfs.Mem
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			hb.do(b, "SendMessage", body)
		}
	})
}

// BenchmarkHTTPReceiveMessage is a ReceiveMessage of ten 1 KiB messages
// and the DeleteMessageBatch of their receipts over HTTP; the ten are sent
// through the broker directly. ns/op is for the ten.
func BenchmarkHTTPReceiveMessage(b *testing.B) {
	hb := newHTTPBench(b)
	recv := []byte(`{"MaxNumberOfMessages":10,"QueueUrl":"` + hb.url + `","WaitTimeSeconds":0}`)
	ins := make([]broker.SendInput, 10)
	for i := range ins {
		ins[i] = broker.SendInput{Body: bytes.Repeat([]byte("x"), 1024)}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := hb.br.Send(context.Background(), "q", ins); err != nil {
			b.Fatal(err)
		}
		var out struct {
			Messages []struct{ ReceiptHandle string }
		}
		if err := json.Unmarshal(hb.do(b, "ReceiveMessage", recv), &out); err != nil || len(out.Messages) != 10 {
			b.Fatalf("received %d: %v", len(out.Messages), err)
		}
		del := []byte(`{"Entries":[`)
		for i, m := range out.Messages {
			if i > 0 {
				del = append(del, ',')
			}
			del = append(del, `{"Id":"`+strconv.Itoa(i)+`","ReceiptHandle":"`+m.ReceiptHandle+`"}`...)
		}
		hb.do(b, "DeleteMessageBatch", append(del, `],"QueueUrl":"`+hb.url+`"}`...))
	}
}
