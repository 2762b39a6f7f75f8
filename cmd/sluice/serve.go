package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sluice-mq/sluice/internal/node"
	"github.com/sluice-mq/sluice/internal/server"
)

func init() { subcommands = append(subcommands, newServeCmd) }

func newServeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Start the broker",
		Long: `Start the broker. Data lives in --data-dir; nothing else needs installing.

Every flag can also be set with an environment variable, shown with each flag,
or with a key of the same name in a YAML file given by --config, e.g.

  data-dir: /var/lib/sluice
  fsync: 5ms

Precedence: flags, then environment, then the config file, then the defaults.

--fsync says when writes reach the disk before they are acknowledged:
  always    every acknowledged write is synced first (concurrent writes share
            one sync). Nothing acknowledged is lost, even on power loss.
  10ms      (any duration) sync at most that often; a machine crash can lose
            the last interval of acknowledged writes.
  never     leave it to the OS; a process crash loses nothing, a machine crash
            can lose anything not yet written back.

A listener address of "" disables it; port 0 picks a free port, and the bound
address is logged on a "listening" line. Each listener holds at most its
--*-max-connections and refuses more at once (HTTP with a 503); slow or idle
clients are cut off by the timeouts below (docs/operations.md, "Connections").

Each listener has a TLS twin (--http-tls-addr, --kafka-tls-addr, --sqs-tls-addr)
serving the same API with --tls-cert and --tls-key, reloaded on SIGHUP and when
the files change (docs/security.md, "TLS"). Without --auth-file every listener
must bind a loopback address; --insecure-allow-anonymous overrides that, with a
warning at every start (docs/security.md, "Safe defaults").

SIGTERM or SIGINT shut down gracefully: in-flight requests finish (within
--shutdown-timeout), data is flushed and synced, and the exit code is 0.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := resolveServeConfig(cmd.Flags(), os.LookupEnv)
			if err != nil {
				return err
			}
			log, err := server.NewLogger(cmd.ErrOrStderr(), cfg.LogLevel, cfg.LogFormat)
			if err != nil {
				return err
			}
			if err := startPprof(os.Getenv(pprofEnv), cmd.ErrOrStderr()); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// SIGHUP means "reread the users file and certificates" (the
			// watchers catch it too); caught here from the start, so one
			// that arrives before they exist, or with neither configured,
			// does not end the process as its default action would.
			ignoreHUP := make(chan os.Signal, 1)
			signal.Notify(ignoreHUP, syscall.SIGHUP)
			go func() {
				for range ignoreHUP {
				}
			}()
			defer func() { signal.Stop(ignoreHUP); close(ignoreHUP) }()
			// After the first signal, restore the default handling so a
			// second Ctrl-C kills a shutdown that hangs.
			context.AfterFunc(ctx, stop)
			// Outbox relays (docs/outbox.md) run beside the broker as its
			// clients, and stop with it.
			rctx, stopRelays := context.WithCancel(ctx)
			waitRelays, err := startServeRelays(rctx, cfg, log)
			if err != nil {
				stopRelays()
				return err
			}
			defer waitRelays()
			defer stopRelays()
			return node.Run(ctx, cfg, log, version)
		},
	}
	addServeFlags(cmd.Flags())
	return cmd
}
