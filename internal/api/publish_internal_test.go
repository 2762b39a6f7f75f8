package api

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sluice-mq/sluice/internal/broker"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// The window a Publish stream reads ahead of its answers: acquire waits
// while the bytes would go past the limit, a lone request larger than the
// limit still passes (or the stream could never take it), and release
// wakes the waiter.
func TestByteWindowBoundsReadAhead(t *testing.T) {
	for _, tc := range []struct {
		name        string
		limit       int64
		held, extra int64
		waits       bool
	}{
		{"fits", 100, 60, 40, false},
		{"one past the limit", 100, 60, 41, true},
		{"larger than the window, alone", 100, 0, 500, false},
		{"larger than the window, behind another", 100, 1, 500, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newByteWindow(tc.limit)
			if tc.held > 0 && !w.acquire(t.Context(), tc.held) {
				t.Fatal("first acquire failed")
			}
			got := make(chan bool, 1)
			go func() { got <- w.acquire(t.Context(), tc.extra) }()
			select {
			case ok := <-got:
				if tc.waits || !ok {
					t.Fatalf("acquire of %d with %d of %d held returned %v at once; want a wait: %v", tc.extra, tc.held, tc.limit, ok, tc.waits)
				}
				return
			case <-time.After(50 * time.Millisecond):
				if !tc.waits {
					t.Fatal("acquire waited with room in the window")
				}
			}
			if w.held() != tc.held {
				t.Fatalf("held %d while waiting, want %d", w.held(), tc.held)
			}
			w.release(tc.held)
			if ok := <-got; !ok || w.held() != tc.extra {
				t.Fatalf("after release: %v, held %d; want true, %d", ok, w.held(), tc.extra)
			}
		})
	}
	w := newByteWindow(10)
	w.acquire(t.Context(), 10)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if w.acquire(ctx, 1) {
		t.Error("acquire with the window full and ctx ended returned true")
	}
}

// FuzzPublishBatch: whatever requests a stream carries, publishBatch
// answers each once, with its id, and either a request-level error or one
// result per entry (stored or refused), never panicking.
func FuzzPublishBatch(f *testing.F) {
	seed := func(reqs ...*sluicev1.PublishRequest) {
		for _, r := range reqs {
			m, err := proto.Marshal(r)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(m)
		}
	}
	part := int32(3)
	seed(&sluicev1.PublishRequest{Id: 1, Destination: &sluicev1.PublishRequest_Topic{Topic: "t"},
		Records: []*sluicev1.ProduceRecord{{Value: []byte("a")}, {Key: []byte("k"), Partition: &part}}},
		&sluicev1.PublishRequest{Id: 2, Destination: &sluicev1.PublishRequest_Queue{Queue: "q"},
			Messages: []*sluicev1.SendEntry{{Body: []byte("b"), GroupId: "g"}}},
		&sluicev1.PublishRequest{Id: 3})
	b, err := broker.Open(broker.Options{Dir: f.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { b.Close() })
	if _, err := b.CreateTopic(broker.TopicSettings{Name: "t", Partitions: 2, MaxMessageBytes: 1024}); err != nil {
		f.Fatal(err)
	}
	if _, err := b.CreateQueue(broker.QueueSettings{Name: "q", MaxMessageBytes: 1024}); err != nil {
		f.Fatal(err)
	}
	s := &streamService{New(Options{Broker: b, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})}
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &sluicev1.PublishRequest{}
		if proto.Unmarshal(data, req) != nil {
			return
		}
		batch := []pendingPublish{{req: req}, {req: req}} // twice: one run of two requests
		out := s.publishBatch(t.Context(), batch)
		if len(out) != len(batch) {
			t.Fatalf("%d answers for %d requests", len(out), len(batch))
		}
		for _, resp := range out {
			if resp.GetId() != req.GetId() {
				t.Fatalf("answer id %d, request id %d", resp.GetId(), req.GetId())
			}
			if resp.GetError() != nil {
				if len(resp.GetResults()) != 0 {
					t.Fatal("a refused request also has results")
				}
				continue
			}
			if len(resp.GetResults()) != publishEntries(req) {
				t.Fatalf("%d results for %d entries", len(resp.GetResults()), publishEntries(req))
			}
			for i, r := range resp.GetResults() {
				if n := btoi(r.GetRecord() != nil) + btoi(r.GetMessage() != nil) + btoi(r.GetError() != nil); n != 1 {
					t.Fatalf("entry %d: %v: want exactly one of record, message, error", i, r)
				}
				if e := r.GetError(); e != nil && (e.GetCode() == "" || e.GetCode() == "internal") {
					t.Fatalf("entry %d refused with code %q: %v", i, e.GetCode(), e)
				}
			}
		}
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
