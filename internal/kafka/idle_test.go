package kafka

import (
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/broker"
)

// A connection that sends no request for MaxIdle is closed and counted, as
// Kafka's connections.max.idle.ms does: after a request, and in the middle
// of a frame. A connection sending requests more often stays open, and so
// does one whose request takes longer than MaxIdle to answer (a long-poll
// fetch): only the wait for the client counts.
func TestIdleConnectionsAreClosed(t *testing.T) {
	// Wall-clock timing (the idle deadline is the socket's): maxIdle is long
	// enough that the busy client below, asking every maxIdle/8, stays
	// inside it on a loaded CI machine (at 300 ms it did not, once).
	const maxIdle = time.Second
	var idleClosed atomic.Int32
	n := startNodeWith(t, "", broker.SyncPolicy{Mode: broker.SyncNever},
		Config{MaxIdle: maxIdle, OnIdleClose: func() { idleClosed.Add(1) }})
	if _, err := n.b.CreateTopic(broker.TopicSettings{Name: "idle", Partitions: 1}); err != nil {
		t.Fatal(err)
	}

	idle := n.raw()
	idle.do(kmsg.NewPtrApiVersionsRequest())
	mid := n.raw()
	if _, err := mid.c.Write([]byte{0, 0, 0, 100, 0, 18}); err != nil { // a size and 2 of its 100 bytes
		t.Fatal(err)
	}
	// The long poll waits 3×maxIdle, then asks again at once: it was
	// never idle, and is answered. Its goroutine reports on done and ends with the test.
	longPoll := n.raw()
	done := make(chan error, 1)
	go func() {
		fetch := fetchReq(12, "idle", 0, 0, int32(3*maxIdle/time.Millisecond))
		longPoll.send(fetch)
		if _, err := longPoll.frame(); err != nil {
			done <- err
			return
		}
		av := kmsg.NewPtrApiVersionsRequest()
		corr := longPoll.send(av)
		b, err := longPoll.frame()
		longPoll.c.Close() // before it idles: closed by the client, not counted
		if err == nil && int32(binary.BigEndian.Uint32(b)) != corr {
			t.Errorf("long poll: correlation %d, want %d", binary.BigEndian.Uint32(b), corr)
		}
		done <- err
	}()

	busy := n.raw()
	start := time.Now()
	for time.Since(start) < 4*maxIdle {
		busy.do(kmsg.NewPtrApiVersionsRequest()) // never idle for maxIdle
		time.Sleep(maxIdle / 8)
	}
	if err := <-done; err != nil {
		t.Fatalf("long-poll connection: %v", err)
	}
	for name, r := range map[string]*rawConn{"idle after a request": idle, "idle mid-frame": mid} {
		_ = r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if b, err := r.frame(); err == nil {
			t.Errorf("%s: still open after %s; got %d bytes", name, time.Since(start), len(b))
		}
	}
	if got := idleClosed.Load(); got != 2 {
		t.Errorf("idle closes counted: %d, want 2", got)
	}
	busy.do(kmsg.NewPtrApiVersionsRequest())
}
