package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
)

// dialect is what differs between the databases: placeholders, the locking
// clause of a claim, the clock, and the migration docs/outbox.md shows.
type dialect struct {
	driver string // database/sql driver name
	// ph is the n-th (1-based) bind placeholder.
	ph func(n int) string
	// lockClause returns the claim's row-locking suffix ("" where the
	// database has no row locks).
	lockClause func(wait bool) string
	// holdLocks: claim, publish and mark run in one transaction, so the
	// claimed rows stay locked until marked and a second relay skips (or
	// waits for) them. SQLite has one writer per database: holding its
	// write lock across a publish would stall the application's inserts,
	// so there a claim is a plain read and one relay runs per database.
	holdLocks bool
	now       string // SQL expression of the current time, as created_at stores it
	// stats is count(*) and the age in seconds (a float) of the oldest
	// unsent row, 0 when there is none; %s is the table.
	stats string
	// schema is the CREATE TABLE (and index) of the expected shape; %s is
	// the table.
	schema string
}

func dollar(n int) string { return "$" + strconv.Itoa(n) }
func question(int) string { return "?" }

func skipLocked(wait bool) string {
	if wait {
		return " FOR UPDATE"
	}
	return " FOR UPDATE SKIP LOCKED"
}

var dialects = map[string]*dialect{
	"postgres": {
		driver: "pgx", ph: dollar, lockClause: skipLocked, holdLocks: true, now: "now()",
		stats: `SELECT count(*), COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8 FROM %s WHERE sent_at IS NULL`,
		schema: `CREATE TABLE IF NOT EXISTS %[1]s (
  id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  event_id   TEXT NOT NULL UNIQUE,
  msg_key    TEXT,
  payload    BYTEA NOT NULL,
  headers    JSONB,
  created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  sent_at    TIMESTAMPTZ
);
CREATE INDEX IF NOT EXISTS %[1]s_unsent ON %[1]s (id) WHERE sent_at IS NULL`,
	},
	"mysql": {
		driver: "mysql", ph: question, lockClause: skipLocked, holdLocks: true, now: "CURRENT_TIMESTAMP(6)",
		stats: `SELECT COUNT(*), COALESCE(TIMESTAMPDIFF(MICROSECOND, MIN(created_at), CURRENT_TIMESTAMP(6)), 0) / 1e6 FROM %s WHERE sent_at IS NULL`,
		schema: `CREATE TABLE IF NOT EXISTS %[1]s (
  id         BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  event_id   VARCHAR(128) NOT NULL UNIQUE,
  msg_key    VARCHAR(128),
  payload    LONGBLOB NOT NULL,
  headers    JSON,
  created_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  sent_at    TIMESTAMP(6) NULL DEFAULT NULL,
  KEY %[1]s_unsent (sent_at, id)
) ENGINE=InnoDB`,
	},
	"sqlite": {
		driver: "sqlite", ph: question, lockClause: func(bool) string { return "" }, holdLocks: false,
		now:   `strftime('%Y-%m-%d %H:%M:%f', 'now')`,
		stats: `SELECT COUNT(*), COALESCE((julianday('now') - julianday(MIN(created_at))) * 86400.0, 0) FROM %s WHERE sent_at IS NULL`,
		schema: `CREATE TABLE IF NOT EXISTS %[1]s (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  event_id   TEXT NOT NULL UNIQUE,
  msg_key    TEXT,
  payload    BLOB NOT NULL,
  headers    TEXT,
  created_at TEXT NOT NULL DEFAULT (strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now')),
  sent_at    TEXT
);
CREATE INDEX IF NOT EXISTS %[1]s_unsent ON %[1]s (id) WHERE sent_at IS NULL`,
	},
}

// claimSQL selects up to $1 unsent rows in id order. There is no "id >
// last seen": ids are handed out at insert and become visible at commit,
// so a smaller id can appear after a larger one was relayed; every claim
// looks at every unsent row (the partial index keeps that cheap).
func (d *dialect) claimSQL(table string, wait bool) string {
	return "SELECT id, event_id, msg_key, payload, headers FROM " + table +
		" WHERE sent_at IS NULL ORDER BY id LIMIT " + d.ph(1) + d.lockClause(wait)
}

// doneSQL marks (or deletes) the rows of n ids.
func (d *dialect) doneSQL(table string, del bool, n int) string {
	var b strings.Builder
	if del {
		b.WriteString("DELETE FROM " + table)
	} else {
		b.WriteString("UPDATE " + table + " SET sent_at = " + d.now)
	}
	b.WriteString(" WHERE id IN (")
	for i := 1; i <= n; i++ {
		if i > 1 {
			b.WriteByte(',')
		}
		b.WriteString(d.ph(i))
	}
	b.WriteByte(')')
	return b.String()
}

// Schema returns the statements that create the outbox table a relay of
// driver expects, named table (what docs/outbox.md shows and the tests
// run); nil for an unknown driver.
func Schema(driver, table string) []string {
	d, ok := dialects[driver]
	if !ok || !ident.MatchString(table) {
		return nil
	}
	return strings.Split(fmt.Sprintf(d.schema, table), ";\n")
}

// Migrate creates the outbox table (and its index) if missing.
func Migrate(ctx context.Context, db *sql.DB, driver, table string) error {
	stmts := Schema(driver, table)
	if stmts == nil {
		return fmt.Errorf("outbox: unknown driver %q or table %q not a plain identifier", driver, table)
	}
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("outbox: migrate %s: %w", table, err)
		}
	}
	return nil
}
