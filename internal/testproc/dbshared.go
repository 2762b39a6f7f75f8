package testproc

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
)

// Databases starts PostgreSQL and MariaDB at most once per test binary,
// on the first test that asks, and hands each test a fresh, empty database
// on it. Declare one per package and Stop it in TestMain after m.Run:
//
//	var dbs testproc.Databases
//	func TestMain(m *testing.M) { code := m.Run(); dbs.Stop(); os.Exit(code) }
type Databases struct {
	pgOnce, myOnce sync.Once
	pg, my         *Database
	pgErr, myErr   error
	n              atomic.Int64
}

// Stop stops whichever servers were started.
func (s *Databases) Stop() {
	s.pg.Stop()
	s.my.Stop()
}

// Postgres returns the DSN (pgx) of a new database on the shared server.
// A missing PostgreSQL fails the test through Missing.
func (s *Databases) Postgres(t testing.TB) string {
	t.Helper()
	s.pgOnce.Do(func() { s.pg, s.pgErr = StartPostgres() })
	srv := s.server(t, s.pg, s.pgErr, "PostgreSQL (Debian package postgresql)")
	name := fmt.Sprintf("t%d", s.n.Add(1))
	s.exec(t, "pgx", srv.DSN, "CREATE DATABASE "+name)
	return strings.Replace(srv.DSN, "/postgres?", "/"+name+"?", 1)
}

// MariaDB returns the DSN (go-sql-driver) of a new database on the shared
// server. A missing MariaDB fails the test through Missing.
func (s *Databases) MariaDB(t testing.TB) string {
	t.Helper()
	s.myOnce.Do(func() { s.my, s.myErr = StartMariaDB() })
	srv := s.server(t, s.my, s.myErr, "MariaDB (Debian package mariadb-server)")
	name := fmt.Sprintf("t%d", s.n.Add(1))
	s.exec(t, "mysql", srv.DSN, "CREATE DATABASE "+name)
	return strings.Replace(srv.DSN, "/test?", "/"+name+"?", 1)
}

// PostgresServer is the shared PostgreSQL server itself (started if need
// be), for tests that need more than a database: its address, replication.
func (s *Databases) PostgresServer(t testing.TB) *Database {
	t.Helper()
	s.pgOnce.Do(func() { s.pg, s.pgErr = StartPostgres() })
	return s.server(t, s.pg, s.pgErr, "PostgreSQL (Debian package postgresql)")
}

func (s *Databases) server(t testing.TB, d *Database, err error, what string) *Database {
	t.Helper()
	if errors.Is(err, ErrNoDatabase) {
		Missing(t, what+" is not installed: "+err.Error())
	}
	if err != nil {
		t.Fatalf("starting %s: %v", what, err)
	}
	return d
}

func (s *Databases) exec(t testing.TB, driver, dsn, stmt string) {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), stmt); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}
