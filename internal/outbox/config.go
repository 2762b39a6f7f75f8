package outbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"time"

	"gopkg.in/yaml.v3"
)

// Config is one relay: which outbox table of which database, where its
// events go, and how. It is what `sluice outbox relay --config FILE` reads
// (YAML, the keys in the yaml tags; docs/outbox.md lists them).
type Config struct {
	// Driver is the database: "postgres", "mysql" (MySQL 8 and MariaDB
	// 10.6+, which have SKIP LOCKED) or "sqlite".
	Driver string `yaml:"driver"`
	// DSN is the driver's connection string: a postgres:// URL, a
	// go-sql-driver DSN (user:pass@tcp(host:3306)/db), or a SQLite file name.
	DSN string `yaml:"dsn"`
	// Table is the outbox table (default "outbox"); its shape is fixed
	// (docs/outbox.md), only the name is free.
	Table string `yaml:"table"`
	// Mode is "polling" (default; every driver) or "cdc" (postgres only:
	// a logical replication slot with pgoutput).
	Mode string `yaml:"mode"`

	// Exactly one of Queue and Topic names the destination.
	Queue string `yaml:"queue"`
	Topic string `yaml:"topic"`
	// DefaultGroup is the FIFO message group of a row whose msg_key is
	// NULL or empty, when Queue is a FIFO queue (default: the table name).
	DefaultGroup string `yaml:"default_group"`

	// Batch is the most rows one claim takes (default 100, at most 1000).
	Batch int `yaml:"batch"`
	// Interval is the pause after a claim found fewer than Batch rows
	// (default 100ms); a full batch is followed by the next at once.
	Interval time.Duration `yaml:"interval"`
	// OnSent is "mark" (default: set sent_at) or "delete" (delete the row).
	OnSent string `yaml:"on_sent"`
	// Lock is how a claim treats rows another relay holds: "skip_locked"
	// (default: take the next free rows, so relays share the load) or
	// "wait" (block until they are released: a hot standby that keeps
	// the order of a single relay). SQLite has no row locks (one relay).
	Lock string `yaml:"lock"`

	// Slot and Publication name the CDC mode's replication slot and
	// publication (default "sluice_outbox" each); both are created if
	// missing.
	Slot        string `yaml:"slot"`
	Publication string `yaml:"publication"`

	// Server is the broker's URL and TokenFile a file holding the bearer
	// token of its native API, for a relay `sluice serve --outbox-config`
	// runs (default: its own HTTP listener, no token); `sluice outbox
	// relay` uses them when --server / --token are not given.
	Server    string `yaml:"server"`
	TokenFile string `yaml:"token_file"`

	// MetricsAddr, if set, serves /metrics (Prometheus text) there.
	MetricsAddr string `yaml:"metrics_addr"`
}

// ident is what a table, slot or publication name may be: it is put into
// SQL text (names cannot be bound), so it is held to plain identifiers.
var ident = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// LoadConfig reads a YAML config file; unknown keys are refused, so a typo
// is an error rather than a default.
func LoadConfig(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, err
	}
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	if err := c.Normalize(); err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Normalize fills the defaults and checks every field.
func (c *Config) Normalize() error {
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&c.Table, "outbox")
	def(&c.Mode, "polling")
	def(&c.OnSent, "mark")
	def(&c.Lock, "skip_locked")
	def(&c.Slot, "sluice_outbox")
	def(&c.Publication, "sluice_outbox")
	def(&c.DefaultGroup, c.Table)
	if c.Batch == 0 {
		c.Batch = 100
	}
	if c.Interval == 0 {
		c.Interval = 100 * time.Millisecond
	}
	var errs []error
	if _, ok := dialects[c.Driver]; !ok {
		errs = append(errs, fmt.Errorf("driver: want postgres, mysql or sqlite, got %q", c.Driver))
	}
	if c.DSN == "" {
		errs = append(errs, errors.New("dsn: required"))
	}
	for k, v := range map[string]string{"table": c.Table, "slot": c.Slot, "publication": c.Publication} {
		if !ident.MatchString(v) {
			errs = append(errs, fmt.Errorf("%s: %q is not a plain identifier (letters, digits, _)", k, v))
		}
	}
	if (c.Queue == "") == (c.Topic == "") {
		errs = append(errs, errors.New("queue, topic: exactly one is required"))
	}
	if c.Mode != "polling" && c.Mode != "cdc" {
		errs = append(errs, fmt.Errorf("mode: want polling or cdc, got %q", c.Mode))
	}
	if c.Mode == "cdc" && c.Driver != "postgres" {
		errs = append(errs, errors.New("mode: cdc is for driver postgres only"))
	}
	if c.OnSent != "mark" && c.OnSent != "delete" {
		errs = append(errs, fmt.Errorf("on_sent: want mark or delete, got %q", c.OnSent))
	}
	if c.Lock != "skip_locked" && c.Lock != "wait" {
		errs = append(errs, fmt.Errorf("lock: want skip_locked or wait, got %q", c.Lock))
	}
	if c.Batch < 1 || c.Batch > 1000 {
		errs = append(errs, fmt.Errorf("batch: want 1 to 1000, got %d", c.Batch))
	}
	if c.Interval < time.Millisecond || c.Interval > time.Minute {
		errs = append(errs, fmt.Errorf("interval: want 1ms to 1m, got %s", c.Interval))
	}
	return errors.Join(errs...)
}
