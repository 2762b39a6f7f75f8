package node

import (
	"fmt"

	"github.com/sluice-mq/sluice/internal/console"
	"github.com/sluice-mq/sluice/internal/server"
)

// mountConsole serves the web console at /ui on the HTTP listeners (and /
// redirecting there). It calls the native API's routes and the admin endpoints
// in-process (the server's own mux), so with authentication on it signs
// browsers in with a bearer token and the API decides what each may do.
func mountConsole(s *server.Server, authRequired bool) error {
	c, err := console.New(console.Options{API: s.Handler(), AuthRequired: authRequired, Logger: s.Logger()})
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	for _, r := range c.Routes() {
		s.RegisterHTTP(r.Pattern, r.Handler)
	}
	return nil
}
