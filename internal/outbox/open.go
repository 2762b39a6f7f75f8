package outbox

import (
	"database/sql"
	"strings"

	// The database/sql drivers of the three dialects (docs/architecture.md,
	// "Dependencies and why").
	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"
)

// Open opens cfg's database with its dialect's driver. A SQLite DSN gets a
// busy timeout unless it sets one, so the relay's short mark transaction
// waits for the application's writer instead of failing at once.
func Open(cfg Config) (*sql.DB, error) {
	d := dialects[cfg.Driver]
	dsn := cfg.DSN
	if cfg.Driver == "sqlite" && !strings.Contains(dsn, "busy_timeout") {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		dsn += sep + "_pragma=busy_timeout(5000)"
	}
	return sql.Open(d.driver, dsn)
}
