package inbox

import (
	"fmt"
	"strings"
	"time"
)

// Dialect is the consumer database's SQL dialect.
type Dialect int

const (
	// Postgres is PostgreSQL (any driver: pgx's stdlib, lib/pq).
	Postgres Dialect = iota + 1
	// MySQL is MySQL 8 or MariaDB through go-sql-driver/mysql (its default
	// of counting changed rows, not found rows, is what Record relies on).
	MySQL
	// SQLite is SQLite 3.24+ (ON CONFLICT DO NOTHING).
	SQLite
)

type dialect struct {
	insertSQL, pruneSQL, schemaSQL string
	// ts converts applied_at to the column's type: every id is stamped by
	// the Go clock (so tests can inject it), in UTC.
	ts func(time.Time) any
}

func (d dialect) insert(table string) string { return fmt.Sprintf(d.insertSQL, table) }
func (d dialect) prune(table string) string  { return fmt.Sprintf(d.pruneSQL, table) }
func (d dialect) schema(table string) []string {
	return strings.Split(fmt.Sprintf(d.schemaSQL, table), ";\n")
}

var dialects = map[Dialect]dialect{
	Postgres: {
		insertSQL: `INSERT INTO %s (event_id, applied_at) VALUES ($1, $2) ON CONFLICT (event_id) DO NOTHING`,
		pruneSQL:  `DELETE FROM %[1]s WHERE event_id IN (SELECT event_id FROM %[1]s WHERE applied_at < $1 ORDER BY applied_at LIMIT $2)`,
		schemaSQL: `CREATE TABLE IF NOT EXISTS %[1]s (
  event_id   TEXT PRIMARY KEY,
  applied_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX IF NOT EXISTS %[1]s_applied_at ON %[1]s (applied_at)`,
		ts: func(t time.Time) any { return t.UTC() },
	},
	MySQL: {
		// ON DUPLICATE KEY with a no-op update, not INSERT IGNORE: IGNORE
		// would also turn a too-long id into a truncated one.
		insertSQL: `INSERT INTO %s (event_id, applied_at) VALUES (?, ?) ON DUPLICATE KEY UPDATE event_id = event_id`,
		pruneSQL:  `DELETE FROM %s WHERE applied_at < ? ORDER BY applied_at LIMIT ?`,
		schemaSQL: `CREATE TABLE IF NOT EXISTS %[1]s (
  event_id   VARCHAR(191) NOT NULL PRIMARY KEY,
  applied_at DATETIME(6) NOT NULL,
  KEY %[1]s_applied_at (applied_at)
) ENGINE=InnoDB`,
		ts: func(t time.Time) any { return t.UTC() },
	},
	SQLite: {
		insertSQL: `INSERT INTO %s (event_id, applied_at) VALUES (?, ?) ON CONFLICT (event_id) DO NOTHING`,
		pruneSQL:  `DELETE FROM %[1]s WHERE event_id IN (SELECT event_id FROM %[1]s WHERE applied_at < ? ORDER BY applied_at LIMIT ?)`,
		// Microseconds since the epoch: SQLite has no time type, and text
		// with a varying number of fraction digits does not sort.
		schemaSQL: `CREATE TABLE IF NOT EXISTS %[1]s (
  event_id   TEXT PRIMARY KEY,
  applied_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS %[1]s_applied_at ON %[1]s (applied_at)`,
		ts: func(t time.Time) any { return t.UnixMicro() },
	},
}
