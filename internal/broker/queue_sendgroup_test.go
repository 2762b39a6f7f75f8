package broker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/vfs"
)

// syncGate holds the next fdatasync of a queue's message segment while
// armed: the write before it is done, the sync not.
type syncGate struct {
	armed   atomic.Bool
	held    chan struct{} // a sync is being held
	release chan struct{} // let the held sync go on
}

func newSyncGate(efs *vfs.ErrorFS) *syncGate {
	g := &syncGate{held: make(chan struct{}), release: make(chan struct{})}
	efs.Inject(vfs.Fault{Op: vfs.OpSync, Match: func(_ vfs.Op, path string) bool {
		if strings.Contains(path, "/queues/") && strings.Contains(path, "/log/") &&
			strings.HasSuffix(path, ".log") && g.armed.CompareAndSwap(true, false) {
			g.held <- struct{}{}
			<-g.release
		}
		return false // never fails the sync, only delays it
	}})
	return g
}

func openOn(t *testing.T, fs vfs.FS) *Broker {
	t.Helper()
	b, err := Open(Options{Dir: "/data", FS: fs, Logger: quietLogger(), HeadroomBytes: testHeadroom,
		Now: func() time.Time { return time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func drainBodies(t *testing.T, b *Broker) []string {
	t.Helper()
	ds, err := b.Receive(context.Background(), "q", ReceiveOptions{Max: 100})
	if err != nil {
		t.Fatal(err)
	}
	out := bodies(ds)
	slices.Sort(out)
	return out
}

// TestGroupedSendsCrashBetweenWriteAndSync: concurrent sends of a standard
// queue go to disk as one group (one append, one sync). A power cut after
// the group's write and before its sync loses only the group, none of whose
// sends was answered; a cut after the sync keeps all of it.
func TestGroupedSendsCrashBetweenWriteAndSync(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem)
	b := openOn(t, efs)
	defer b.Close()
	if _, err := b.CreateQueue(QueueSettings{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	send := func(body string) error {
		_, err := b.Send(ctx, "q", []SendInput{{Body: []byte(body)}})
		return err
	}
	if err := send("before"); err != nil {
		t.Fatal(err)
	}
	gate := newSyncGate(efs)

	// x leads a group of its own; its sync is held.
	gate.armed.Store(true)
	xDone := make(chan error, 1)
	go func() { xDone <- send("x") }()
	<-gate.held

	// Five more sends queue behind it, to go out as the next group.
	const n = 5
	var answered atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if err := send(fmt.Sprintf("g%d", i)); err != nil {
				t.Errorf("g%d: %v", i, err)
			}
			answered.Add(1)
		})
	}
	q, err := b.queue("q")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		q.groups.mu.Lock()
		defer q.groups.mu.Unlock()
		return len(q.groups.pending) == n
	})

	// x's sync goes on; the group of five is written and its sync held.
	gate.armed.Store(true)
	gate.release <- struct{}{}
	if err := <-xDone; err != nil {
		t.Fatalf("x: %v", err)
	}
	<-gate.held
	if a := answered.Load(); a != 0 {
		t.Fatalf("%d sends answered before their group's sync", a)
	}

	cut := openOn(t, mem.CrashClone())
	if got, want := drainBodies(t, cut), []string{"before", "x"}; !slices.Equal(got, want) {
		t.Errorf("after a cut between the group's write and its sync: %q, want %q", got, want)
	}
	cut.Close()

	gate.release <- struct{}{}
	wg.Wait()
	after := openOn(t, mem.CrashClone())
	defer after.Close()
	want := []string{"before", "g0", "g1", "g2", "g3", "g4", "x"}
	if got := drainBodies(t, after); !slices.Equal(got, want) {
		t.Errorf("after a cut once the group was synced: %q, want %q", got, want)
	}
}

// TestGroupedSendsOffsets: sends from many goroutines at once each get
// consecutive sequences for their own messages, no two sends share one, and
// every message is delivered once.
func TestGroupedSendsOffsets(t *testing.T) {
	e := newEnv(t, nil)
	e.createQueue(QueueSettings{Name: "q"})
	const senders, per = 16, 20
	var mu sync.Mutex
	seen := map[int64]string{}
	var wg sync.WaitGroup
	for w := range senders {
		wg.Go(func() {
			for i := range per {
				in := make([]SendInput, 1+i%3)
				for k := range in {
					in[k] = SendInput{Body: fmt.Appendf(nil, "w%d-%d-%d", w, i, k)}
				}
				res, err := e.b.Send(context.Background(), "q", in)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for k, r := range res {
					if r.Sequence != res[0].Sequence+int64(k) {
						t.Errorf("send's message %d at %d, first at %d", k, r.Sequence, res[0].Sequence)
					}
					if prev, dup := seen[r.Sequence]; dup {
						t.Errorf("sequence %d given to %s and %s", r.Sequence, prev, in[k].Body)
					}
					seen[r.Sequence] = string(in[k].Body)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	got := map[string]bool{}
	for {
		ds := e.receive("q", 1000)
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			if got[string(d.Body)] {
				t.Fatalf("%s delivered twice", d.Body)
			}
			got[string(d.Body)] = true
			if seen[d.Sequence] != string(d.Body) {
				t.Errorf("sequence %d delivered %s, sent as %s", d.Sequence, d.Body, seen[d.Sequence])
			}
		}
	}
	if len(got) != len(seen) {
		t.Errorf("delivered %d of %d", len(got), len(seen))
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("condition not reached in 10 s")
		}
	}
}
