package tlsconf

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// DefaultPollInterval is how often Watch looks at the files.
const DefaultPollInterval = 5 * time.Second

// Watch reloads on SIGHUP and polls the files every interval (<= 0:
// DefaultPollInterval) until ctx ends, on a goroutine of its own; wait
// returns once that goroutine has stopped. SIGHUP is caught from the
// moment Watch returns (a SIGHUP nobody catches ends a Go process).
// Polling reads the files' bytes, so a change is seen whatever the editor
// or the certificate tool does to mtimes and inodes (a Kubernetes
// secret's symlink swap included).
func (r *Reloader) Watch(ctx context.Context, interval time.Duration) (wait func()) {
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer signal.Stop(hup)
		r.watch(ctx, interval, hup)
	}()
	return func() { <-done }
}

func (r *Reloader) watch(ctx context.Context, interval time.Duration, hup <-chan os.Signal) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			r.log.Info("SIGHUP: reloading the tls certificate")
			_ = r.Reload() // logged and reported by Reload
		case <-t.C:
			r.Poll()
		}
	}
}
