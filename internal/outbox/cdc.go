package outbox

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
)

// CDC is the PostgreSQL change-data-capture relay.
type CDC struct{ metrics *Metrics }

// NewCDC returns the CDC relay of cfg.
func NewCDC(cfg Config, db *sql.DB, pub Publisher, log *slog.Logger) (*CDC, error) {
	return nil, errors.New("outbox: cdc mode not built yet")
}

// Run relays until ctx ends.
func (c *CDC) Run(ctx context.Context) error { return nil }

// Metrics returns the relay's metrics.
func (c *CDC) Metrics() *Metrics { return c.metrics }
