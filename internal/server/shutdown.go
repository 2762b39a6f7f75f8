package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// shutdown stops the server in the order that loses nothing acknowledged:
// not ready, the hand-offs (BeforeDrain: a cluster node's leaderships, while
// the listeners still answer), stop accepting and drain in-flight requests
// (bounded by ShutdownTimeout), cut off stragglers, join the serve
// goroutines, and only then run the closers — so the broker's final
// flush-and-sync sees no more writes arriving. It runs once, from Wait or from a failed Start; later
// calls return the first one's result.
func (s *Server) shutdown() error {
	s.stopOnce.Do(func() { s.stopErr = s.stop() })
	return s.stopErr
}

func (s *Server) stop() error {
	s.stopping.Store(true)
	s.SetReady(false)

	s.mu.Lock()
	running := make(map[string]Frontend, len(s.running))
	for name, f := range s.running {
		running[name] = f
	}
	closers := append([]closer(nil), s.closers...)
	handOffs := append([]closer(nil), s.handOffs...)
	s.mu.Unlock()

	s.handOff(handOffs)
	close(s.draining)

	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	// Drain listeners concurrently: one slow front-end must not eat the
	// others' share of the timeout.
	var wg sync.WaitGroup
	for name, f := range running {
		wg.Go(func() { s.drain(ctx, name, f) })
	}
	wg.Wait()
	s.cancelBase() // handlers still running see their context cancelled
	s.serveWG.Wait()

	// Closers get their own budget: flushing the broker is not optional just
	// because the drain used up its time.
	cctx, ccancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer ccancel()
	var errs []error
	for i := len(closers) - 1; i >= 0; i-- {
		c := closers[i]
		start := time.Now()
		if err := c.fn(cctx); err != nil {
			s.log.Error("close failed", "closer", c.name, "err", err)
			errs = append(errs, fmt.Errorf("close %s: %w", c.name, err))
			continue
		}
		s.log.Info("closed", "closer", c.name, "took", time.Since(start))
	}
	if len(errs) == 0 {
		s.log.Info("shutdown complete")
	}
	return errors.Join(errs...)
}

// handOff runs the BeforeDrain functions, within one ShutdownTimeout.
func (s *Server) handOff(handOffs []closer) {
	if len(handOffs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	for _, h := range handOffs {
		start := time.Now()
		if err := h.fn(ctx); err != nil {
			s.log.Error("hand-off before shutdown failed; stopping anyway", "step", h.name, "err", err)
			continue
		}
		s.log.Info("handed off before shutdown", "step", h.name, "took", time.Since(start))
	}
}

func (s *Server) drain(ctx context.Context, name string, f Frontend) {
	err := f.Shutdown(ctx)
	if err == nil {
		return
	}
	s.log.Warn("in-flight requests cut off at shutdown timeout", "listener", name, "err", err)
	if c, ok := f.(io.Closer); ok {
		if err := c.Close(); err != nil && !errors.Is(err, context.Canceled) {
			s.log.Warn("close listener", "listener", name, "err", err)
		}
	}
}
