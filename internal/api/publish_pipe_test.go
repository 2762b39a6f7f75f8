package api_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/api"
	"github.com/sluice-mq/sluice/internal/batch"
	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// syncHold holds, while holding, every fdatasync of a topic segment until
// the test releases it: the test then sees what the stream does while a
// group is being made durable, and can cut the power at that moment.
type syncHold struct {
	vfs.FS
	holding atomic.Bool
	held    chan chan struct{} // a held sync's release, closed to let it finish
	stopped chan struct{}      // closed by stop: nothing is held any more
	once    sync.Once
}

func newSyncHold(fs vfs.FS) *syncHold {
	return &syncHold{FS: fs, held: make(chan chan struct{}), stopped: make(chan struct{})}
}

// stop lets every sync through from now on; register it as a cleanup
// after the broker's, so it runs before the broker's Close (which syncs).
func (g *syncHold) stop() {
	g.once.Do(func() { g.holding.Store(false); close(g.stopped) })
}

func (g *syncHold) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &heldFile{File: f, g: g}, nil
}

func (g *syncHold) Create(name string) (vfs.File, error)     { return g.wrap(g.FS.Create(name)) }
func (g *syncHold) OpenAppend(name string) (vfs.File, error) { return g.wrap(g.FS.OpenAppend(name)) }
func (g *syncHold) Open(name string) (vfs.File, error)       { return g.wrap(g.FS.Open(name)) }

type heldFile struct {
	vfs.File
	g *syncHold
}

func (f *heldFile) Sync() error {
	sep := string(filepath.Separator)
	if f.g.holding.Load() && strings.HasSuffix(f.Name(), ".log") && strings.Contains(f.Name(), sep+"topics"+sep) {
		release := make(chan struct{})
		select {
		case f.g.held <- release:
			select {
			case <-release:
			case <-f.g.stopped:
			}
		case <-f.g.stopped:
		}
	}
	return f.File.Sync()
}

// nextHeld is the release of the next held sync.
func (g *syncHold) nextHeld(t *testing.T) chan struct{} {
	t.Helper()
	select {
	case r := <-g.held:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no fdatasync of the topic came")
		return nil
	}
}

// While one request's group is being synced, the stream already stores
// the next request (its bytes reach the partition's log: placed for the
// next group commit), instead of waiting for the first answer; then both
// are answered, in request order, with offsets in that order. The serial
// stream left the second request unread by the broker until the first
// sync ended, and fails here.
func TestPublishPlacesNextWhileSyncing(t *testing.T) {
	gate := newSyncHold(vfs.Default)
	b, err := broker.Open(broker.Options{Dir: t.TempDir(), FS: gate, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	t.Cleanup(gate.stop)
	if _, err := b.CreateTopic(broker.TopicSettings{Name: "pipe", Partitions: 1, MaxMessageBytes: 1024}); err != nil {
		t.Fatal(err)
	}
	a := api.New(api.Options{Broker: b, Logger: quiet()})
	mux := http.NewServeMux()
	for _, r := range a.Routes() {
		mux.Handle(r.Pattern, r.Handler)
	}
	s := h2cServer(t, mux).Publish(t.Context())
	size := func() int64 {
		info, err := b.DescribeTopic("pipe")
		if err != nil {
			t.Fatal(err)
		}
		return info.Partitions[0].SizeBytes
	}

	gate.holding.Store(true)
	if err := s.Send(topicReq(1, "pipe", []byte("first"))); err != nil {
		t.Fatal(err)
	}
	release := gate.nextHeld(t) // the first request's group, being synced
	gate.holding.Store(false)
	before := size()
	if err := s.Send(topicReq(2, "pipe", []byte("second"))); err != nil {
		t.Fatal(err)
	}
	// Polled, not slept: the second request is placed as soon as the
	// stream's placer reads it.
	deadline := time.Now().Add(5 * time.Second)
	for size() == before {
		if time.Now().After(deadline) {
			t.Fatal("the second request did not reach the log while the first one's fdatasync ran: the stream is serial")
		}
		time.Sleep(time.Millisecond)
	}
	if info, _ := b.DescribeTopic("pipe"); info.Partitions[0].HighWatermark != 0 {
		t.Fatalf("high watermark %d with the first sync held: something was published before it was durable", info.Partitions[0].HighWatermark)
	}
	close(release)
	for i, want := range []int64{0, 1} {
		resp, err := s.Receive()
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetId() != uint64(i+1) || len(resp.GetResults()) != 1 || resp.GetResults()[0].GetRecord().GetOffset() != want ||
			resp.GetResults()[0].GetError() != nil {
			t.Fatalf("answer %d: %v, want request %d at offset %d", i, resp, i+1, want)
		}
	}
	_ = s.CloseRequest()
	if _, err := s.Receive(); err == nil {
		t.Error("an answer to no request")
	}
	res, err := b.Fetch(t.Context(), "pipe", 0, 0, broker.FetchOptions{MaxBytes: 1 << 20})
	if err != nil || res.HighWatermark != 2 {
		t.Errorf("log after both answers: high watermark %d (%v), want 2", res.HighWatermark, err)
	}
}

// A power cut (vfs.MemFS.CrashClone: only what fdatasync made durable is
// kept) at five moments while one stream has many requests in flight, each
// cut while a group's fdatasync is held, its records placed and not
// durable: on every cut, each record answered before it is in the
// reopened log at its answered offset, and the log holds the stream's
// records in the order sent, without a gap. An answer that left once its
// records were placed, before their group's sync, fails here.
func TestPublishPipelinePowerCut(t *testing.T) {
	mem := vfs.NewMem()
	hold := newSyncHold(mem)
	open := func(fs vfs.FS) *broker.Broker {
		b, err := broker.Open(broker.Options{Dir: "/data", FS: fs, Logger: quiet(), HeadroomBytes: 64 << 10})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := open(hold)
	t.Cleanup(func() { b.Close() })
	t.Cleanup(hold.stop)
	if _, err := b.CreateTopic(broker.TopicSettings{Name: "cut", Partitions: 1, MaxMessageBytes: 1024}); err != nil {
		t.Fatal(err)
	}
	a := api.New(api.Options{Broker: b, Logger: quiet()})
	mux := http.NewServeMux()
	for _, r := range a.Routes() {
		mux.Handle(r.Pattern, r.Handler)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s := h2cServer(t, mux).Publish(ctx)
	hold.holding.Store(true)
	go func() { // three records a request, numbered in the order sent
		for id := uint64(0); ctx.Err() == nil; id++ {
			if s.Send(topicReq(id, "cut", fmt.Appendf(nil, "%d", 3*id), fmt.Appendf(nil, "%d", 3*id+1), fmt.Appendf(nil, "%d", 3*id+2))) != nil {
				return
			}
		}
	}()
	var mu sync.Mutex
	answered := map[int64]string{}     // offset -> value
	received := make(chan struct{}, 1) // an answer came
	go func() {
		for id := uint64(0); ; id++ {
			resp, err := s.Receive()
			if err != nil {
				return
			}
			mu.Lock()
			for j, r := range resp.GetResults() {
				if r.GetError() == nil && resp.GetId() == id {
					answered[r.GetRecord().GetOffset()] = fmt.Sprint(3*id + uint64(j))
				}
			}
			mu.Unlock()
			select {
			case received <- struct{}{}:
			default:
			}
		}
	}()
	cuts := []int{1, 5, 20, 60, 150} // at these held syncs
	for n, cut := 1, 0; cut < len(cuts); n++ {
		release := hold.nextHeld(t)
		if n == cuts[cut] {
			// Give an answer that must not come yet (its group is held)
			// a moment to arrive: this only widens the window in which a
			// premature answer is caught; nothing here depends on it.
			select {
			case <-received:
			default:
			}
			select {
			case <-received:
			case <-time.After(20 * time.Millisecond):
			}
			mu.Lock()
			before := maps.Clone(answered) // every one of them was answered before the cut
			mu.Unlock()
			crashed := open(mem.CrashClone())
			checkCut(t, crashed, cut, before)
			crashed.Close()
			cut++
		}
		close(release)
	}
	hold.stop()
}

// checkCut: after the power cut, the log is the stream's records from the
// first, in the order sent, and holds every answered one at its offset.
func checkCut(t *testing.T, b *broker.Broker, cut int, answered map[int64]string) {
	t.Helper()
	got := map[int64]string{}
	for off := int64(0); ; {
		res, err := b.Fetch(t.Context(), "cut", 0, off, broker.FetchOptions{MaxBytes: 1 << 20})
		if err != nil {
			t.Fatalf("cut %d: fetch at %d: %v", cut, off, err)
		}
		n := 0
		for data := res.Batches; len(data) > 0; {
			size, err := batch.FrameSize(data)
			if err != nil {
				t.Fatal(err)
			}
			for r, err := range batch.Records(data[:size]) {
				if err != nil {
					t.Fatalf("cut %d: %v", cut, err)
				}
				if r.Offset < off {
					continue
				}
				if want := fmt.Sprint(r.Offset); string(r.Value) != want {
					t.Fatalf("cut %d: offset %d holds record %q: the log lost the stream's order or a record before it", cut, r.Offset, r.Value)
				}
				got[r.Offset] = string(r.Value)
				n++
			}
			data = data[size:]
		}
		off = res.Next
		if n == 0 || off < 0 || off >= res.HighWatermark {
			break
		}
	}
	t.Logf("cut %d: %d records answered before it, %d kept", cut, len(answered), len(got))
	for off, v := range answered {
		if got[off] != v {
			t.Fatalf("cut %d: offset %d was answered for record %s and the log after the cut has %q (%d answered, %d kept)", cut, off, v, got[off], len(answered), len(got))
		}
	}
}
