package broker

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testlog"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// fakeClock is the time tests drive.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type env struct {
	t     *testing.T
	fs    vfs.FS
	clock *fakeClock
	b     *Broker
	logs  *testlog.Buffer // what the broker logs (newEnvWithLogs); nil: discarded
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// loggerTo is a logger writing to l (Info and above), or a quiet one if l is nil.
func loggerTo(l *testlog.Buffer) *slog.Logger {
	if l == nil {
		return quietLogger()
	}
	return slog.New(slog.NewTextHandler(l, nil))
}

// testHeadroom keeps the in-memory FS's headroom file small.
const testHeadroom = 64 << 10

// newEnv opens a broker on fsys (a MemFS when nil) with a fake clock.
func newEnv(t *testing.T, fsys vfs.FS) *env {
	t.Helper()
	return newEnvLogging(t, fsys, nil)
}

// newEnvWithLogs is newEnv with what the broker logs kept in e.logs.
func newEnvWithLogs(t *testing.T, fsys vfs.FS) *env {
	t.Helper()
	return newEnvLogging(t, fsys, &testlog.Buffer{})
}

func newEnvLogging(t *testing.T, fsys vfs.FS, logs *testlog.Buffer) *env {
	t.Helper()
	if fsys == nil {
		fsys = vfs.NewMem()
	}
	e := &env{t: t, fs: fsys, clock: newClock(), logs: logs}
	e.open()
	t.Cleanup(func() {
		if e.b != nil {
			e.b.Close()
		}
	})
	return e
}

func (e *env) open() {
	e.t.Helper()
	b, err := Open(Options{Dir: "/data", FS: e.fs, Now: e.clock.Now, Logger: loggerTo(e.logs), SnapshotEvery: 50,
		HeadroomBytes: testHeadroom})
	if err != nil {
		e.t.Fatalf("open: %v", err)
	}
	e.b = b
}

// restart closes the broker cleanly and opens it again.
func (e *env) restart() {
	e.t.Helper()
	if err := e.b.Close(); err != nil {
		e.t.Fatalf("close: %v", err)
	}
	e.open()
}

// crash drops everything not synced (a power cut) and opens the broker on
// what is left. The old broker's files are dead, so it is abandoned, not closed.
func (e *env) crash() {
	e.t.Helper()
	mem := e.fs.(*vfs.MemFS)
	crashed := mem.CrashClone()
	old := e.b
	e.fs = crashed
	e.open()
	go old.Close() // its files fail with ErrCrashed; closing just stops goroutines
}

func (e *env) createQueue(s QueueSettings) {
	e.t.Helper()
	if _, err := e.b.CreateQueue(s); err != nil {
		e.t.Fatalf("create %s: %v", s.Name, err)
	}
}

func (e *env) send(queue string, bodies ...string) []SendResult {
	e.t.Helper()
	in := make([]SendInput, len(bodies))
	for i, b := range bodies {
		in[i] = SendInput{Body: []byte(b)}
	}
	res, err := e.b.Send(context.Background(), queue, in)
	if err != nil {
		e.t.Fatalf("send: %v", err)
	}
	for _, r := range res {
		if r.Err != nil {
			e.t.Fatalf("send: %v", r.Err)
		}
	}
	return res
}

func (e *env) receive(queue string, max int) []Delivery {
	e.t.Helper()
	ds, err := e.b.Receive(context.Background(), queue, ReceiveOptions{Max: max})
	if err != nil {
		e.t.Fatalf("receive: %v", err)
	}
	return ds
}

func bodies(ds []Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = string(d.Body)
	}
	return out
}
