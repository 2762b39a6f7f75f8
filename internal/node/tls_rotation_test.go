package node_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/server"
	"github.com/sluice-mq/sluice/internal/tlsconf/tlstest"
)

// TestKafkaCertificateRotationUnderLoad: a franz-go producer keeps
// producing over the Kafka TLS listener while new clients keep connecting
// and the certificate files are replaced. No produce fails; every client
// that connects after the server switched sees the new certificate.
func TestKafkaCertificateRotationUnderLoad(t *testing.T) {
	srv, ca := startTLSNode(t, func(c *server.Config) { c.TLSReloadInterval = 10 * time.Millisecond })
	next, err := ca.Issue("next", "sluice", 8)
	if err != nil {
		t.Fatal(err)
	}
	base, err := ca.ClientConfig(tlstest.Pair{})
	if err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr(server.KafkaTLS)
	// withSerial is base, recording the serial of every certificate the
	// server presents to this client.
	withSerial := func(seen *atomic.Int64) *tls.Config {
		c := base.Clone()
		c.VerifyConnection = func(cs tls.ConnectionState) error {
			seen.Store(cs.PeerCertificates[0].SerialNumber.Int64())
			return nil
		}
		return c
	}
	var oldSerial atomic.Int64
	old, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTLSConfig(withSerial(&oldSerial)),
		kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("rotation"))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := old.ProduceSync(ctx, &kgo.Record{Value: []byte("first")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var (
		serving  atomic.Int64
		stop     = make(chan struct{})
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures []string
		produced atomic.Int64
		clients  atomic.Int64
	)
	serving.Store(7)
	fail := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(failures) < 10 {
			failures = append(failures, fmt.Sprintf(format, a...))
		}
	}
	// halt stops the load and waits for it, once: at the end, or when a
	// t.Fatal below returns early.
	halt := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer halt()
	wg.Go(func() { // the old connection keeps producing
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := old.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
				fail("produce on the old client: %v", err)
				return
			}
			produced.Add(1)
		}
	})
	wg.Go(func() { // new clients keep connecting
		for {
			select {
			case <-stop:
				return
			default:
			}
			atLeast := serving.Load()
			var seen atomic.Int64
			c, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTLSConfig(withSerial(&seen)),
				kgo.DefaultProduceTopic("rotation"))
			if err != nil {
				fail("new client: %v", err)
				return
			}
			err = c.ProduceSync(ctx, &kgo.Record{Value: []byte("new")}).FirstErr()
			c.Close()
			clients.Add(1)
			switch {
			case err != nil:
				fail("new client's produce: %v", err)
			case seen.Load() < atLeast:
				fail("a client that connected while serial %d served saw serial %d", atLeast, seen.Load())
			}
		}
	})

	// waitFor waits (10 s at most) until n more clients connected and n
	// more produces went through on the old one: load, not a fixed sleep.
	waitFor := func(n int64) {
		t.Helper()
		c0, p0 := clients.Load(), produced.Load()
		deadline := time.Now().Add(10 * time.Second)
		for clients.Load() < c0+n || produced.Load() < p0+n {
			if time.Now().After(deadline) {
				t.Fatalf("no load: %d new clients, %d produces", clients.Load()-c0, produced.Load()-p0)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor(2)
	if err := tlstest.Install(next, srv.Config().TLSCertFile, srv.Config().TLSKeyFile); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for srv.TLS().Leaf().SerialNumber.Int64() != 8 {
		if time.Now().After(deadline) {
			t.Fatal("the new certificate was never served")
		}
		time.Sleep(time.Millisecond)
	}
	serving.Store(8)
	waitFor(3)
	halt()

	for _, f := range failures {
		t.Error(f)
	}
	if oldSerial.Load() != 7 {
		t.Errorf("the old client's connection saw serial %d, want 7 (it should not have reconnected)", oldSerial.Load())
	}
	t.Logf("%d produces on the old client, %d new clients", produced.Load(), clients.Load())
}
