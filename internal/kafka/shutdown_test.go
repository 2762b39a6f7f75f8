package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestShutdown: a long-poll fetch in flight is answered (empty) at once,
// idle connections are closed, and Shutdown returns well before the
// fetch's MaxWait.
func TestShutdown(t *testing.T) {
	n := startNode(t, "")
	n.createTopic("sd", 1)
	fetching := make(chan struct{}, 1)
	n.s.mu.Lock()
	n.s.testHookHandling = func(req kmsg.Request) {
		if req.Key() == 1 {
			fetching <- struct{}{}
		}
	}
	n.s.mu.Unlock()
	idle := n.raw()
	idle.do(kmsg.NewPtrMetadataRequest())
	r := n.raw()
	req := fetchReq(12, "sd", 0, 0, 60000)
	corr := r.send(req)
	<-fetching

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.s.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	p := r.recv(req, corr).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if p.ErrorCode != 0 || len(p.RecordBatches) != 0 {
		t.Fatalf("fetch answered at shutdown: %+v", p)
	}
	r.expectClosed()
	idle.expectClosed()
	if err := <-n.done; err != ErrServerClosed {
		t.Fatalf("Serve returned %v", err)
	}
	n.done <- ErrServerClosed // for n.stop at cleanup
}
