package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

const usage = `sluice: a durable work queue and a Kafka-style log in one binary.

Usage:
  sluice serve [flags]    start the broker (data in --data-dir)
  sluice version          print the version
  sluice help             this text

Run "sluice serve --help" for the server's flags; every flag also reads an
environment variable, SLUICE_<FLAG> (e.g. SLUICE_DATA_DIR).
`

var version = "dev"

func run(args []string) error {
	if len(args) == 0 {
		fmt.Print(usage)
		return nil
	}
	switch args[0] {
	case "serve":
		return serve(args[1:])
	case "version":
		fmt.Println("sluice", version)
		return nil
	case "help", "-h", "--help":
		fmt.Print(usage)
		return nil
	}
	return fmt.Errorf("unknown command %q (see sluice help)", args[0])
}

type serveConfig struct {
	dataDir   string
	httpAddr  string
	logLevel  string
	logFormat string
}

// envDefault returns the value of SLUICE_<NAME> or def, so every flag has an
// environment equivalent and flags given on the command line win over both.
func envDefault(flagName, def string) string {
	key := "SLUICE_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
	if v, ok := os.LookupEnv(key); ok {
		return v
	}
	return def
}

func parseServe(args []string, stderr io.Writer) (serveConfig, error) {
	var c serveConfig
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.dataDir, "data-dir", envDefault("data-dir", "./sluice-data"), "directory for logs, journals and metadata (env SLUICE_DATA_DIR)")
	fs.StringVar(&c.httpAddr, "http-addr", envDefault("http-addr", "127.0.0.1:8080"), "native API, metrics and health listener (env SLUICE_HTTP_ADDR)")
	fs.StringVar(&c.logLevel, "log-level", envDefault("log-level", "info"), "debug, info, warn or error (env SLUICE_LOG_LEVEL)")
	fs.StringVar(&c.logFormat, "log-format", envDefault("log-format", "text"), "text or json (env SLUICE_LOG_FORMAT)")
	err := fs.Parse(args)
	return c, err
}

func newLogger(c serveConfig) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch c.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: want text or json, got %q", c.logFormat)
}

func serve(args []string) error {
	c, err := parseServe(args, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	log, err := newLogger(c)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.dataDir, 0o755); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	ln, err := net.Listen("tcp", c.httpAddr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ready\n") })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("sluice serving", "http", ln.Addr().String(), "data_dir", c.dataDir)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
}
