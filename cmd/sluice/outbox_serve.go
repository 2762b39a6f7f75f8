package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"

	"github.com/sluice-mq/sluice/client"
	"github.com/sluice-mq/sluice/internal/outbox"
	"github.com/sluice-mq/sluice/internal/server"
)

// startServeRelays loads every --outbox-config file (a mistake fails the
// start) and runs each relay beside the broker until ctx ends: a client of
// the native API like any other, through the public client, never the
// broker's internals. wait returns once every relay has stopped.
func startServeRelays(ctx context.Context, cfg server.Config, log *slog.Logger) (wait func(), err error) {
	var cfgs []outbox.Config
	var paths []string
	for p := range strings.SplitSeq(cfg.OutboxConfigs, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		rc, err := outbox.LoadConfig(p)
		if err != nil {
			return nil, fmt.Errorf("--outbox-config: %w", err)
		}
		if rc.Server == "" {
			if rc.Server, err = ownURL(cfg.HTTPAddr); err != nil {
				return nil, fmt.Errorf("--outbox-config %s: %w", p, err)
			}
		}
		cfgs, paths = append(cfgs, rc), append(paths, p)
	}
	var wg sync.WaitGroup
	for i, rc := range cfgs {
		c, err := relayClient(rc, rc.Server, "", nil)
		if err != nil {
			return nil, fmt.Errorf("--outbox-config %s: %w", paths[i], err)
		}
		l := log.With("outbox", paths[i])
		wg.Go(func() {
			if err := runRelay(ctx, rc, c, l, true); err != nil {
				l.Error("outbox relay stopped", "err", err)
			}
		})
	}
	return wg.Wait, nil
}

// ownURL is the plaintext native API's URL, for relays without server:.
func ownURL(httpAddr string) (string, error) {
	host, port, err := net.SplitHostPort(httpAddr)
	if err != nil || port == "0" {
		return "", errors.New("the relay needs server: in its config, or a fixed --http-addr port to reach this broker by")
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

// relayClient is the client of the relay's broker: url, with the token
// from the config's token_file, or else token; tc (the --tls-ca and
// client-certificate flags of the standalone relay) may be nil.
func relayClient(rc outbox.Config, url, token string, tc *tls.Config) (*client.Client, error) {
	if rc.TokenFile != "" {
		b, err := os.ReadFile(rc.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("token_file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	var opts []client.Option
	if token != "" {
		opts = append(opts, client.WithToken(token))
	}
	if tc != nil {
		opts = append(opts, client.WithTLS(tc))
	}
	return client.New(url, opts...), nil
}
