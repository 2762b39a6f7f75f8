package main

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/sluice-mq/sluice/internal/node"
	"github.com/sluice-mq/sluice/internal/server"
	"github.com/sluice-mq/sluice/internal/testproc"
	"github.com/sluice-mq/sluice/internal/tlsconf/tlstest"
)

// TestBenchOverTLS: with --tls-ca the three drivers reach the broker's
// TLS listeners (the plaintext ones are closed, so nothing can silently
// fall back to them).
func TestBenchOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a broker under load")
	}
	if err := tlstest.Available(); err != nil {
		testproc.Missing(t, "openssl is not installed ("+err.Error()+"): apt-get install openssl")
	}
	ca, err := tlstest.NewCA(t.TempDir(), "bench")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Issue("server", "sluice", 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.Defaults()
	cfg.DataDir, cfg.Fsync = t.TempDir(), "never"
	cfg.HTTPAddr, cfg.KafkaAddr, cfg.SQSAddr = "", "", ""
	cfg.HTTPTLSAddr, cfg.KafkaTLSAddr, cfg.SQSTLSAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.TLSCertFile, cfg.TLSKeyFile = pair.Cert, pair.Key
	srv, err := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), "benchtest")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := srv.Start(ctx, node.Setup(node.Options{})); err != nil {
		cancel()
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- srv.Wait(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-waited; err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	for _, tc := range []struct{ proto, w string }{{"kafka", "produce"}, {"sqs", "queue"}, {"native", "queue"}} {
		t.Run(tc.proto+"/"+tc.w, func(t *testing.T) {
			rep := runBench(t, srv, tc.w, tc.proto, "--tls-ca", ca.Cert, "--count", "200", "--duration", "2s",
				"--in-flight", "8", "--size", "100", "--probe-dir", t.TempDir(), "--probe-time", "20ms",
				"--server", "https://"+srv.Addr(server.HTTPTLS), "--kafka-addr", srv.Addr(server.KafkaTLS),
				"--sqs-url", "https://"+srv.Addr(server.SQSTLS))
			checkBenchResult(t, rep, tc.proto, tc.w)
		})
	}
}
