package client_test

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/sluice-mq/sluice/client"
	sluicev1 "github.com/sluice-mq/sluice/proto/sluice/v1"
)

// fakeStream records the requests a Publisher writes and answers them
// when the test says.
type fakeStream struct {
	sent     chan *sluicev1.PublishRequest
	answers  chan fakeAnswer
	closeReq chan struct{}
	once     sync.Once
}

type fakeAnswer struct {
	resp *sluicev1.PublishResponse
	err  error
}

func newFakeStream() *fakeStream {
	return &fakeStream{sent: make(chan *sluicev1.PublishRequest, 100), answers: make(chan fakeAnswer, 100), closeReq: make(chan struct{})}
}

func (f *fakeStream) Send(r *sluicev1.PublishRequest) error { f.sent <- r; return nil }
func (f *fakeStream) Receive() (*sluicev1.PublishResponse, error) {
	select {
	case a := <-f.answers:
		return a.resp, a.err
	case <-f.closeReq:
		return nil, io.EOF
	}
}
func (f *fakeStream) CloseRequest() error  { f.once.Do(func() { close(f.closeReq) }); return nil }
func (f *fakeStream) CloseResponse() error { return nil }

// ok answers req with offsets from base.
func (f *fakeStream) ok(req *sluicev1.PublishRequest, base int64) {
	resp := &sluicev1.PublishResponse{Id: req.GetId()}
	for i := range req.GetRecords() {
		resp.Results = append(resp.Results, &sluicev1.PublishResult{Record: &sluicev1.ProduceResult{Offset: base + int64(i)}})
	}
	f.answers <- fakeAnswer{resp: resp}
}

// fakeClock runs linger timers when the test fires them.
type fakeClock struct {
	mu     sync.Mutex
	timers []*fakeTimer
}

type fakeTimer struct {
	d       time.Duration
	f       func()
	stopped bool
}

func (c *fakeClock) after(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{d: d, f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !t.stopped
		t.stopped = true
		return was
	}
}

// fire runs every running timer, as if their time had come.
func (c *fakeClock) fire() int {
	c.mu.Lock()
	var run []*fakeTimer
	for _, t := range c.timers {
		if !t.stopped {
			t.stopped = true
			run = append(run, t)
		}
	}
	c.timers = nil
	c.mu.Unlock()
	for _, t := range run {
		t.f()
	}
	return len(run)
}

// sizes reads the entry counts of the requests written so far.
func sizes(s *fakeStream) []int {
	var out []int
	for {
		select {
		case r := <-s.sent:
			out = append(out, len(r.GetRecords()))
		case <-time.After(30 * time.Millisecond):
			return out
		}
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// How a Publisher cuts batches: by free request slot without a linger, by
// the linger's timer, by count and by bytes.
func TestPublisherBatching(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    client.PublisherOptions
		publish int // records of value 100 bytes
		fire    bool
		want    []int // entries per request written, before any answer
	}{
		{"no linger: each goes while a slot is free", client.PublisherOptions{MaxInFlight: 3}, 5, false, []int{1, 1, 1}},
		{"no linger, one slot: the rest waits for the answer", client.PublisherOptions{MaxInFlight: 1}, 5, false, []int{1}},
		{"linger: nothing before the timer", client.PublisherOptions{Linger: time.Second}, 5, false, nil},
		{"linger: the timer sends the batch", client.PublisherOptions{Linger: time.Second}, 5, true, []int{5}},
		{"linger: a full batch goes at once", client.PublisherOptions{Linger: time.Second, MaxBatch: 2}, 5, false, []int{2, 2}},
		{"linger: full batches, then the rest on the timer", client.PublisherOptions{Linger: time.Second, MaxBatch: 2}, 5, true, []int{2, 2, 1}},
		{"bytes bound the batch", client.PublisherOptions{Linger: time.Second, MaxBatchBytes: 250}, 5, true, []int{2, 2, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFakeStream()
			clock := &fakeClock{}
			p := client.NewTestPublisher("t", &tc.opts, func(context.Context) client.PublishStream { return s }, clock.after)
			for range tc.publish {
				if _, err := p.PublishRecord(t.Context(), &client.ProduceRecord{Value: make([]byte, 96)}); err != nil {
					t.Fatal(err)
				}
			}
			if tc.fire {
				clock.fire()
			}
			if got := sizes(s); !equal(got, tc.want) {
				t.Errorf("requests of %v entries, want %v", got, tc.want)
			}
		})
	}
}

// The default linger is adaptive: after an answer released k senders, the
// next request waits until k entries are back (not the first one alone,
// which would fill the free slot with one entry and leave the rest for the
// next round trip), or for the timer, and only until half a round trip
// (at most 250 µs) after that answer; with nothing released it goes at
// once. Linger < 0 never waits.
func TestPublisherWaitsForReleasedSenders(t *testing.T) {
	var clk atomic.Int64 // the Publisher's clock, in ns; only the test moves it
	advance := func(d time.Duration) { clk.Add(int64(d)) }
	start := func(t *testing.T, opts client.PublisherOptions) (*fakeStream, *fakeClock, func()) {
		s := newFakeStream()
		timers := &fakeClock{}
		p := client.NewTestPublisher("t", &opts, func(context.Context) client.PublishStream { return s }, timers.after)
		client.SetPublisherNow(p, func() time.Time { return time.Unix(0, clk.Load()) })
		publish := func() {
			if _, err := p.PublishRecord(t.Context(), &client.ProduceRecord{Value: []byte("v")}); err != nil {
				t.Fatal(err)
			}
		}
		publish() // nothing answered yet: goes at once
		publish()
		publish()
		if got := sizes(s); !equal(got, []int{1}) {
			t.Fatalf("before any answer: requests of %v entries, want [1]", got)
		}
		advance(time.Millisecond)                                                      // round trips of 1 ms: waits of at most 250 µs
		s.ok(&sluicev1.PublishRequest{Records: make([]*sluicev1.ProduceRecord, 1)}, 0) // releases 1; 2 were waiting
		if got := sizes(s); !equal(got, []int{2}) {
			t.Fatalf("after the first answer: requests of %v, want [2] (more waiting than released)", got)
		}
		advance(time.Millisecond)
		s.ok(&sluicev1.PublishRequest{Records: make([]*sluicev1.ProduceRecord, 2)}, 1) // releases 2, none waiting
		return s, timers, publish
	}
	t.Run("adaptive", func(t *testing.T) {
		s, timers, publish := start(t, client.PublisherOptions{MaxInFlight: 1})
		publish()
		if got := sizes(s); len(got) != 0 {
			t.Fatalf("one of two released senders back: requests of %v went; want it to wait", got)
		}
		publish()
		if got := sizes(s); !equal(got, []int{2}) {
			t.Fatalf("both back: requests of %v, want [2] without the timer", got)
		}
		advance(time.Millisecond)
		s.ok(&sluicev1.PublishRequest{Records: make([]*sluicev1.ProduceRecord, 2)}, 3)
		publish() // one of two back, and no more: the timer sends it
		if got := sizes(s); len(got) != 0 {
			t.Fatalf("before the timer: %v", got)
		}
		if timers.fire() != 1 {
			t.Fatal("no linger timer was running")
		}
		if got := sizes(s); !equal(got, []int{1}) {
			t.Fatalf("the timer sent %v, want [1]", got)
		}
		advance(time.Millisecond)
		s.ok(&sluicev1.PublishRequest{Records: make([]*sluicev1.ProduceRecord, 1)}, 5) // 2 released since the last request went
		if got := sizes(s); len(got) != 0 {
			t.Fatalf("an answer with nothing waiting sent %v", got)
		}
		advance(300 * time.Microsecond) // past the wait's end, counted from the answer
		publish()
		if got := sizes(s); !equal(got, []int{1}) {
			t.Fatalf("a publish 300 µs after the answer: requests of %v, want [1] at once", got)
		}
	})
	t.Run("never wait", func(t *testing.T) {
		s, _, publish := start(t, client.PublisherOptions{MaxInFlight: 1, Linger: -1})
		publish()
		if got := sizes(s); !equal(got, []int{1}) {
			t.Fatalf("Linger -1: requests of %v, want [1] at once", got)
		}
	})
}

// An answer frees its slot: what piled up meanwhile goes as one request,
// and each future gets its own entry's offset.
func TestPublisherAnswersResolveFutures(t *testing.T) {
	s := newFakeStream()
	p := client.NewTestPublisher("t", &client.PublisherOptions{MaxInFlight: 1}, func(context.Context) client.PublishStream { return s }, (&fakeClock{}).after)
	ctx := t.Context()
	var fs []*client.PublishFuture
	for range 4 {
		f, err := p.PublishRecord(ctx, &client.ProduceRecord{Value: []byte("v")})
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
	}
	first := <-s.sent
	s.ok(first, 10)
	second := <-s.sent
	if len(first.GetRecords()) != 1 || len(second.GetRecords()) != 3 {
		t.Fatalf("requests of %d and %d entries, want 1 and 3", len(first.GetRecords()), len(second.GetRecords()))
	}
	resp := &sluicev1.PublishResponse{Id: second.GetId(), Results: []*sluicev1.PublishResult{
		{Record: &sluicev1.ProduceResult{Offset: 11}},
		{Error: &sluicev1.PublishError{Code: "invalid_argument", Info: &sluicev1.ErrorInfo{Reason: "MESSAGE_TOO_LARGE"}}},
		{Record: &sluicev1.ProduceResult{Offset: 12}},
	}}
	s.answers <- fakeAnswer{resp: resp}
	for i, want := range []int64{10, 11, -1, 12} {
		r, err := fs[i].Wait(ctx)
		switch {
		case want < 0:
			var e *client.Error
			if !errors.Is(err, client.ErrMessageTooLarge) || !errors.As(err, &e) || e.Code != connect.CodeInvalidArgument {
				t.Errorf("entry %d: %v, want ErrMessageTooLarge (invalid_argument)", i, err)
			}
		case err != nil || r.GetRecord().GetOffset() != want:
			t.Errorf("entry %d: %v, %v; want offset %d", i, r, err, want)
		}
	}
}

// The buffer is bounded: past MaxPending, Publish waits for an answer (or
// its context), so a slow server holds the publishers back instead of
// growing memory.
func TestPublisherBufferBound(t *testing.T) {
	s := newFakeStream()
	p := client.NewTestPublisher("t", &client.PublisherOptions{MaxPending: 3, MaxInFlight: 1}, func(context.Context) client.PublishStream { return s }, (&fakeClock{}).after)
	ctx := t.Context()
	for range 3 {
		if _, err := p.PublishRecord(ctx, &client.ProduceRecord{Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	if _, err := p.PublishRecord(short, &client.ProduceRecord{Value: []byte("v")}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a fourth publish with 3 pending: %v, want it to wait until its context ends", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := p.PublishRecord(ctx, &client.ProduceRecord{Value: []byte("v")})
		done <- err
	}()
	s.ok(<-s.sent, 0) // one answered: room for one more
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A stream that breaks fails every entry written to it and not answered;
// the next publish opens a new stream.
func TestPublisherStreamFailure(t *testing.T) {
	var mu sync.Mutex
	var streams []*fakeStream
	open := func(context.Context) client.PublishStream {
		mu.Lock()
		defer mu.Unlock()
		s := newFakeStream()
		streams = append(streams, s)
		return s
	}
	p := client.NewTestPublisher("t", &client.PublisherOptions{MaxInFlight: 2}, open, (&fakeClock{}).after)
	ctx := t.Context()
	f1, _ := p.PublishRecord(ctx, &client.ProduceRecord{Value: []byte("a")})
	f2, _ := p.PublishRecord(ctx, &client.ProduceRecord{Value: []byte("b")})
	mu.Lock()
	first := streams[0]
	mu.Unlock()
	<-first.sent
	<-first.sent
	first.answers <- fakeAnswer{err: connect.NewError(connect.CodeUnavailable, errors.New("gone"))}
	for _, f := range []*client.PublishFuture{f1, f2} {
		if _, err := f.Wait(ctx); connect.CodeOf(err) != connect.CodeUnavailable {
			t.Errorf("entry on the broken stream: %v, want unavailable", err)
		}
	}
	f3, err := p.PublishRecord(ctx, &client.ProduceRecord{Value: []byte("c")})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(streams) != 2 {
		t.Fatalf("%d streams opened, want a second after the failure", len(streams))
	}
	second := streams[1]
	mu.Unlock()
	second.ok(<-second.sent, 7)
	if r, err := f3.Wait(ctx); err != nil || r.GetRecord().GetOffset() != 7 {
		t.Errorf("on the new stream: %v, %v", r, err)
	}
}

// Close whose context ends before everything was answered fails what it
// could not send (errPublisherClosed) and opens no new stream for it.
func TestPublisherCloseFailsUnsent(t *testing.T) {
	var mu sync.Mutex
	opened := 0
	open := func(context.Context) client.PublishStream {
		mu.Lock()
		defer mu.Unlock()
		opened++
		return newFakeStream()
	}
	p := client.NewTestPublisher("t", &client.PublisherOptions{MaxInFlight: 1}, open, (&fakeClock{}).after)
	ctx := t.Context()
	f1, _ := p.PublishRecord(ctx, &client.ProduceRecord{Value: []byte("a")})
	f2, _ := p.PublishRecord(ctx, &client.ProduceRecord{Value: []byte("b")}) // waits for the one slot
	short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	if err := p.Close(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close: %v, want its context's deadline", err)
	}
	wait, cancelWait := context.WithTimeout(ctx, 2*time.Second) // bounded: before the fix f2 went to a new stream and waited there
	defer cancelWait()
	for i, f := range []*client.PublishFuture{f1, f2} {
		if _, err := f.Wait(wait); err == nil {
			t.Errorf("entry %d answered by nobody succeeded", i)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if opened != 1 {
		t.Errorf("%d streams opened, want 1: an unsent entry reopened a stream after Close", opened)
	}
}
