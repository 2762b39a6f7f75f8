package node

import (
	"fmt"
	"net/http"

	"github.com/sluice-mq/sluice/internal/console"
	"github.com/sluice-mq/sluice/internal/server"
)

// mountConsole serves the web console at /ui on the HTTP listeners (and /
// redirecting there). It calls the native API's routes in-process, so with
// authentication on it signs browsers in with a bearer token and the API
// decides what each may do.
func mountConsole(s *server.Server, api http.Handler, authRequired bool) error {
	c, err := console.New(console.Options{API: api, AuthRequired: authRequired, Logger: s.Logger()})
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	for _, r := range c.Routes() {
		s.RegisterHTTP(r.Pattern, r.Handler)
	}
	return nil
}
