package node

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/server"
)

// authReloadEvery is how often the users file is reread: an edit made
// with `sluice user` or by hand is in force within this long (or at once
// on SIGHUP).
const authReloadEvery = 2 * time.Second

// openAuth opens the users file the configuration names, or returns nil
// (authentication off) when it names none. The store rereads the file
// every authReloadEvery and on SIGHUP until the server shuts down; a
// broken edit is logged and the previous version stays in force.
func openAuth(s *server.Server) (*auth.Store, error) {
	path := s.Config().AuthFile
	if path == "" {
		return nil, nil
	}
	store, err := auth.Open(path, auth.Options{Logger: s.Logger(), OnFailure: s.Metrics().AuthFailure})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer signal.Stop(hup)
		t := time.NewTicker(authReloadEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
			case <-t.C:
			}
			if err := store.Reload(); err != nil {
				s.Logger().Error("auth file reload failed; keeping the previous version", "err", err)
			}
		}
	}()
	s.OnClose("auth-file watcher", func(context.Context) error {
		cancel()
		<-done
		return nil
	})
	s.Logger().Info("authentication on", "auth_file", path)
	return store, nil
}
