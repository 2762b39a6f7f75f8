package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/outbox"
	"github.com/sluice-mq/sluice/internal/server"
)

func init() { subcommands = append(subcommands, newOutboxCmd) }

func newOutboxCmd() *cobra.Command {
	f := &clientFlags{}
	cmd := newClientGroup("outbox", "Relay a transactional outbox table to a queue or topic (docs/outbox.md)", f)
	cmd.AddCommand(outboxRelayCmd(f), outboxSchemaCmd())
	return cmd
}

func outboxRelayCmd(f *clientFlags) *cobra.Command {
	var path, logFormat string
	cmd := &cobra.Command{
		Use:   "relay --config FILE",
		Short: "Publish an outbox table's rows to the broker until stopped (SIGTERM)",
		Long: `Reads the outbox table named in the config file and publishes its rows to
the queue or topic it names, marking (or deleting) each row only after the
broker's durable ack: at-least-once, every message carrying the row's event
id. Polling mode works on PostgreSQL, MySQL/MariaDB and SQLite; CDC mode
reads PostgreSQL's WAL through a logical replication slot. The broker is
--server (with --token and the TLS flags); docs/outbox.md lists the keys.`,
		Args: cobra.NoArgs,
		RunE: runE(f, func(ctx context.Context, cmd *cobra.Command, c *client.Client, _ []string) error {
			if path == "" {
				return errors.New("--config: required")
			}
			cfg, err := outbox.LoadConfig(path)
			if err != nil {
				return err
			}
			log, err := relayLogger(cmd, logFormat)
			if err != nil {
				return err
			}
			// The config's server: and token_file: stand in for the flags
			// when these are not given.
			if cfg.Server != "" && !cmd.Flags().Changed("server") && os.Getenv("SLUICE_SERVER") == "" {
				if c, err = relayClient(cfg, cfg.Server, f.token, f.tls.config); err != nil {
					return err
				}
			} else if cfg.TokenFile != "" && f.token == "" {
				if c, err = relayClient(cfg, f.server, "", f.tls.config); err != nil {
					return err
				}
			}
			return runRelay(ctx, cfg, c, log, false)
		}),
	}
	cmd.Flags().StringVar(&path, "config", "", "relay config `file` (YAML; docs/outbox.md)")
	cmd.Flags().StringVar(&logFormat, "log-format", "text", "log `format`: text or json")
	return cmd
}

func relayLogger(cmd *cobra.Command, format string) (*slog.Logger, error) {
	return server.NewLogger(cmd.ErrOrStderr(), "info", format) // as sluice serve logs
}

// runRelay opens the database, waits for the broker (a relay started
// before it retries rather than exits), and relays until ctx ends. A
// missing destination or a refused credential stops it, unless
// waitForDestination (a relay inside `sluice serve`, whose broker may be
// new and empty: it waits for the queue or topic to be created).
func runRelay(ctx context.Context, cfg outbox.Config, c *client.Client, log *slog.Logger, waitForDestination bool) error {
	db, err := outbox.Open(cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	var pub outbox.Publisher
	for attempt := 1; ; attempt++ {
		if pub, err = outbox.NewPublisher(ctx, c, cfg); err == nil {
			break
		}
		// A missing destination, or a refused credential, is a mistake to
		// report, not an outage to wait out.
		if ctx.Err() != nil {
			return nil
		}
		missing := errors.Is(err, client.ErrQueueNotFound) || errors.Is(err, client.ErrTopicNotFound)
		if (missing && !waitForDestination) || errors.Is(err, client.ErrUnauthenticated) || errors.Is(err, client.ErrPermissionDenied) {
			return err
		}
		if missing {
			// Only inside `sluice serve`: the destination may be created after the start.
			log.Warn("outbox: waiting for the destination to be created", "err", err, "attempt", attempt)
		} else {
			log.Warn("outbox: broker not reachable yet", "err", err, "attempt", attempt)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
	var run func(context.Context) error
	var metrics *outbox.Metrics
	switch cfg.Mode {
	case "cdc":
		r, err := outbox.NewCDC(cfg, db, pub, log)
		if err != nil {
			return err
		}
		run, metrics = r.Run, r.Metrics()
	default:
		r, err := outbox.NewRelay(cfg, db, pub, log)
		if err != nil {
			return err
		}
		run, metrics = r.Run, r.Metrics()
	}
	if cfg.MetricsAddr != "" {
		stop, err := serveRelayMetrics(cfg.MetricsAddr, metrics, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	return run(ctx)
}

// serveRelayMetrics serves /metrics on addr until stop.
func serveRelayMetrics(addr string, m *outbox.Metrics, log *slog.Logger) (stop func(), err error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics_addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	log.Info("listening", "listener", "metrics", "addr", l.Addr().String())
	go func() { _ = srv.Serve(l) }()
	return func() { _ = srv.Close() }, nil
}

func outboxSchemaCmd() *cobra.Command {
	var driver, table string
	cmd := &cobra.Command{
		Use:   "schema --driver postgres|mysql|sqlite",
		Short: "Print the CREATE TABLE of the outbox table the relay expects",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			stmts := outbox.Schema(driver, table)
			if stmts == nil {
				return fmt.Errorf("--driver %q, --table %q: want postgres, mysql or sqlite, and a plain identifier", driver, table)
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), strings.Join(stmts, ";\n")+";")
			return err
		},
	}
	cmd.Flags().StringVar(&driver, "driver", "postgres", "database: postgres, mysql or sqlite")
	cmd.Flags().StringVar(&table, "table", "outbox", "table `name`")
	return cmd
}
