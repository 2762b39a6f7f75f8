package testproc

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ErrNoDatabase is returned by StartPostgres and StartMariaDB when the
// Debian package is not installed; a test hands it to Missing, so it fails
// (or, with SLUICE_ALLOW_MISSING_CLIENTS=1, skips) loudly.
var ErrNoDatabase = errors.New("database server not installed")

// Database is a PostgreSQL or MariaDB server a test package started on a
// temporary data directory and a free 127.0.0.1 port. Start it once per
// package (TestMain, or lazily behind a sync.Once) and Stop it after
// m.Run: each start costs a few seconds.
type Database struct {
	// DSN connects as the superuser to the default database, in the form
	// the package's Go driver takes (pgx: a URL; go-sql-driver: its DSN).
	DSN    string
	Addr   string // 127.0.0.1:port
	dir    string
	stop   func()
	reaper *exec.Cmd // stops the server if this process dies first
}

// Stop shuts the server down and removes its data directory.
func (d *Database) Stop() {
	if d == nil {
		return
	}
	if d.reaper != nil {
		_ = d.reaper.Process.Kill()
		_ = d.reaper.Wait()
	}
	d.stop()
	_ = os.RemoveAll(d.dir)
}

// startReaper runs a shell that waits for this process to be gone, then
// runs stop (a shell command that stops the server and removes its
// directory): a test binary that panics, or that go test kills at its
// timeout, never reaches Stop, and a database server must not outlive it.
func startReaper(stop string) *exec.Cmd {
	cmd := exec.Command("sh", "-c", fmt.Sprintf("while kill -0 %d 2>/dev/null; do sleep 1; done; %s", os.Getpid(), stop))
	if cmd.Start() != nil {
		return nil // no sh: Stop still stops the server
	}
	return cmd
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func shellCmd(c *exec.Cmd) string {
	q := make([]string, len(c.Args))
	for i, a := range c.Args {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

// freePort is a free 127.0.0.1 port below the ephemeral range (ports.go): a
// database server is named its port before it binds it.
func freePort() (int, error) { return stablePort() }

// postgresBin is the bin directory of the newest installed PostgreSQL.
func postgresBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	if len(dirs) == 0 {
		return "", fmt.Errorf("%w: no /usr/lib/postgresql/*/bin (apt-get install postgresql)", ErrNoDatabase)
	}
	sort.Slice(dirs, func(i, j int) bool { return pgMajor(dirs[i]) < pgMajor(dirs[j]) })
	return dirs[len(dirs)-1], nil
}

func pgMajor(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// asOwner runs a PostgreSQL program as the postgres user when we are root
// (PostgreSQL refuses to run as root), as ourselves otherwise.
func asOwner(name string, args ...string) *exec.Cmd {
	if os.Geteuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
	}
	return exec.Command(name, args...)
}

// StartPostgres initialises a cluster in a new temporary directory and
// starts it on 127.0.0.1 with trust authentication, wal_level=logical
// (the outbox's CDC mode) and durability off (fsync, synchronous commit:
// a test's data need not survive the machine). settings are extra
// "name=value" server settings.
func StartPostgres(settings ...string) (*Database, error) {
	bin, err := postgresBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "sluice-pg-")
	if err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("%w: running as root needs the postgres user: %v", ErrNoDatabase, err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := asOwner(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	opts := []string{"listen_addresses=127.0.0.1", "port=" + strconv.Itoa(port), "unix_socket_directories=" + dir,
		"fsync=off", "synchronous_commit=off", "full_page_writes=off", "wal_level=logical",
		"max_replication_slots=8", "max_wal_senders=8", "max_connections=100"}
	var o []string
	for _, s := range append(opts, settings...) {
		o = append(o, "-c "+s)
	}
	ctl := filepath.Join(bin, "pg_ctl")
	if out, err := asOwner(ctl, "-D", data, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "start", "-o", strings.Join(o, " ")).CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	stopCmd := func() *exec.Cmd { return asOwner(ctl, "-D", data, "-m", "immediate", "-w", "stop") }
	return &Database{
		DSN: "postgres://postgres@" + addr + "/postgres?sslmode=disable", Addr: addr, dir: dir,
		stop:   func() { _ = stopCmd().Run() },
		reaper: startReaper(shellCmd(stopCmd()) + "; rm -rf " + shellQuote(dir)),
	}, nil
}

// StartMariaDB initialises a MariaDB data directory in a new temporary
// directory and starts mariadbd on 127.0.0.1 without grant tables (any
// user, no password: a test server on loopback) and without durability.
// It creates the database "test" that DSN names.
func StartMariaDB() (*Database, error) {
	server, err := exec.LookPath("mariadbd")
	if err != nil {
		if server, err = exec.LookPath("/usr/sbin/mariadbd"); err != nil {
			return nil, fmt.Errorf("%w: no mariadbd (apt-get install mariadb-server)", ErrNoDatabase)
		}
	}
	dir, err := os.MkdirTemp("", "sluice-mariadb-")
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(filepath.Join(data, "test"), 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	args := []string{"--no-defaults", "--datadir=" + data, "--socket=" + filepath.Join(dir, "sock"),
		"--pid-file=" + filepath.Join(dir, "pid"), "--port=" + strconv.Itoa(port), "--bind-address=127.0.0.1",
		"--skip-grant-tables", "--skip-name-resolve", "--innodb-flush-log-at-trx-commit=0",
		"--innodb-doublewrite=0", "--innodb-buffer-pool-size=64M", "--innodb-log-file-size=16M", "--log-error=" + filepath.Join(dir, "log")}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	cmd := exec.Command(server, args...)
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case err := <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			os.RemoveAll(dir)
			return nil, fmt.Errorf("mariadbd exited: %v\n%s", err, log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			os.RemoveAll(dir)
			return nil, fmt.Errorf("mariadbd not listening on %s within 60s\n%s", addr, log)
		}
	}
	return &Database{DSN: "root@tcp(" + addr + ")/test?parseTime=true", Addr: addr, dir: dir, stop: stop,
		reaper: startReaper(fmt.Sprintf("kill -9 %d; rm -rf %s", cmd.Process.Pid, shellQuote(dir)))}, nil
}
