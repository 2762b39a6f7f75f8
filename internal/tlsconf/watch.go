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
// DefaultPollInterval) until ctx ends. Polling reads the files' bytes, so
// a change is seen whatever the editor or the certificate tool does to
// mtimes and inodes (a Kubernetes secret's symlink swap included).
func (r *Reloader) Watch(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
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
