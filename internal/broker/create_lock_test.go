package broker

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// gatedFS holds every MkdirAll of a path containing match until release is
// closed: a create stuck in its disk writes.
type gatedFS struct {
	vfs.FS
	match   string
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

// open lets every held MkdirAll through (idempotent, so a failing test's
// cleanup can call it too).
func (g *gatedFS) open() { g.once.Do(func() { close(g.release) }) }

func (g *gatedFS) MkdirAll(path string) error {
	if g.match != "" && strings.Contains(path, g.match) {
		select {
		case g.entered <- struct{}{}: // the first one tells the test
		default:
		}
		<-g.release
	}
	return g.FS.MkdirAll(path)
}

// TestCreateQueueDoesNotBlockTraffic: while one queue's create waits on the
// disk, sends and receives on other queues, lookups and even a second
// create of another queue... the first two proceed. (Creates are
// serialized; traffic is not.) On the old code every lookup waited for
// the create's fsyncs.
func TestCreateQueueDoesNotBlockTraffic(t *testing.T) {
	g := &gatedFS{FS: vfs.NewMem(), entered: make(chan struct{}, 1), release: make(chan struct{})}
	e := newEnv(t, g)
	t.Cleanup(g.open) // runs before newEnv's Close
	e.createQueue(QueueSettings{Name: "busy"})
	g.match = "slow"

	created := make(chan error, 1)
	go func() {
		_, err := e.b.CreateQueue(QueueSettings{Name: "slow"})
		created <- err
	}()
	<-g.entered // the create is inside its disk writes

	done := make(chan struct{})
	go func() {
		defer close(done)
		e.send("busy", "m1")
		if got := bodies(e.receive("busy", 1)); len(got) != 1 || got[0] != "m1" {
			t.Errorf("received %q", got)
		}
		if _, err := e.b.GetQueue("busy"); err != nil {
			t.Errorf("GetQueue: %v", err)
		}
		if _, err := e.b.GetQueue("slow"); err == nil {
			t.Error("a queue still being created is visible")
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("traffic on another queue waited for a create's disk writes")
	}
	g.open()
	if err := <-created; err != nil {
		t.Fatalf("create: %v", err)
	}
	e.send("slow", "m2")
}

// TestCreateDuringCloseLeavesNothingOpen: a create that finishes its disk
// writes after Close took its list of queues is refused and closes what it
// opened; the queue is durable and there after a restart.
func TestCreateDuringCloseLeavesNothingOpen(t *testing.T) {
	g := &gatedFS{FS: vfs.NewMem(), entered: make(chan struct{}, 1), release: make(chan struct{})}
	e := newEnv(t, g)
	t.Cleanup(g.open)
	g.match = "late"
	created := make(chan error, 1)
	go func() {
		_, err := e.b.CreateQueue(QueueSettings{Name: "late"})
		created <- err
	}()
	<-g.entered
	closed := make(chan error, 1)
	go func() { closed <- e.b.Close() }()
	// Close marks the broker closed and closes the queues it has; it does
	// not wait for the create. Give it the time to get there.
	deadline := time.Now().Add(10 * time.Second)
	for {
		e.b.mu.RLock()
		c := e.b.closed
		e.b.mu.RUnlock()
		if c || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	g.open()
	if err := <-created; err != ErrClosed {
		t.Fatalf("create during close: %v, want ErrClosed", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	g.match = ""
	e.open()
	if _, err := e.b.Send(context.Background(), "late", []SendInput{{Body: []byte("x")}}); err != nil {
		t.Fatalf("send after restart: %v", err)
	}
}
