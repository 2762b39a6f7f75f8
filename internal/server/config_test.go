package server

import (
	"strings"
	"testing"
	"time"
)

func TestParseFsync(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want FsyncPolicy
		err  bool
	}{
		{"always", FsyncPolicy{Mode: FsyncAlways}, false},
		{"never", FsyncPolicy{Mode: FsyncNever}, false},
		{"10ms", FsyncPolicy{Mode: FsyncInterval, Interval: 10 * time.Millisecond}, false},
		{"0s", FsyncPolicy{}, true},
		{"-1s", FsyncPolicy{}, true},
		{"sometimes", FsyncPolicy{}, true},
		{"", FsyncPolicy{}, true},
	} {
		got, err := ParseFsync(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseFsync(%q) = %+v, %v; want %+v, err=%v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestValidateNamesTheFlag(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"empty data dir", func(c *Config) { c.DataDir = " " }, "--data-dir"},
		{"no http", func(c *Config) { c.HTTPAddr = "" }, "--http-addr"},
		{"bad kafka addr", func(c *Config) { c.KafkaAddr = "9092" }, "--kafka-addr"},
		{"bad advertised", func(c *Config) { c.SQSAdvertisedAddr = "host" }, "--sqs-advertised-addr"},
		{"bad fsync", func(c *Config) { c.Fsync = "often" }, "--fsync"},
		{"bad level", func(c *Config) { c.LogLevel = "loud" }, "--log-level"},
		{"bad format", func(c *Config) { c.LogFormat = "xml" }, "--log-format"},
		{"zero body limit", func(c *Config) { c.MaxRequestBytes = 0 }, "--max-request-bytes"},
		{"zero timeout", func(c *Config) { c.ShutdownTimeout = 0 }, "--shutdown-timeout"},
		{"zero header timeout", func(c *Config) { c.ReadHeaderTimeout = 0 }, "--read-header-timeout"},
		{"negative body timeout", func(c *Config) { c.ReadBodyTimeout = -time.Second }, "--read-body-timeout"},
		{"zero http idle", func(c *Config) { c.HTTPIdleTimeout = 0 }, "--http-idle-timeout"},
		{"zero kafka idle", func(c *Config) { c.KafkaMaxIdle = 0 }, "--kafka-connections-max-idle"},
		{"negative cap", func(c *Config) { c.SQSMaxConnections = -1 }, "--sqs-max-connections"},
		{"no http listener at all", func(c *Config) { c.HTTPAddr, c.HTTPTLSAddr, c.MetricsAddr = "", "", "" }, "--http-addr"},
		{"bad tls addr", func(c *Config) { c.KafkaTLSAddr = "9093" }, "--kafka-tls-addr"},
		{"bad tls advertised", func(c *Config) { c.SQSTLSAdvertisedAddr = "host" }, "--sqs-tls-advertised-addr"},
		{"bad metrics addr", func(c *Config) { c.MetricsAddr = "9100" }, "--metrics-addr"},
		{"tls listener without cert", func(c *Config) { c.SQSTLSAddr = "127.0.0.1:9325" }, "--sqs-tls-addr"},
		{"cert without key", func(c *Config) { c.TLSCertFile = "c.pem" }, "--tls-cert and --tls-key"},
		{"key without cert", func(c *Config) { c.TLSKeyFile = "k.pem" }, "--tls-cert and --tls-key"},
		{"client ca without cert", func(c *Config) { c.TLSClientCAFile = "ca.pem" }, "--tls-client-ca"},
		{"zero reload interval", func(c *Config) { c.TLSReloadInterval = 0 }, "--tls-reload-interval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults()
			tc.mutate(&c)
			err := c.Validate()
			if err == nil || !strings.HasPrefix(err.Error(), tc.want+":") || strings.Contains(err.Error(), "\n") {
				t.Errorf("Validate = %v; want one line starting with %q", err, tc.want+":")
			}
		})
	}
	if err := Defaults().Validate(); err != nil {
		t.Errorf("defaults invalid: %v", err)
	}
	c := Defaults()
	c.KafkaAddr, c.SQSAddr = "", "" // disabling a front-end listener is allowed
	if err := c.Validate(); err != nil {
		t.Errorf("disabled listeners rejected: %v", err)
	}
}

// A cap of 0 is auto: a quarter of the open-file limit, at least 64; a set
// cap is taken as it is.
func TestMaxConnections(t *testing.T) {
	c := Defaults()
	c.KafkaMaxConnections = 7
	if got := c.MaxConnections(Kafka); got != 7 {
		t.Errorf("set cap: %d, want 7", got)
	}
	auto := c.MaxConnections(HTTP)
	if n, ok := openFileLimit(); ok && auto != int(max(64, min(n/4, 1<<20))) {
		t.Errorf("auto cap %d with an open-file limit of %d", auto, n)
	}
	if auto < 64 {
		t.Errorf("auto cap %d, want at least 64", auto)
	}
}

// TestLoopbackOnlyWithoutAuth: with no auth file a listener may bind only
// loopback (docs/security.md, "Safe defaults"); any other address, every
// interface included, refuses to start naming the flag and why, unless
// --insecure-allow-anonymous or an auth file is given.
func TestLoopbackOnlyWithoutAuth(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		refuse string // the flag the error names; "" accepted
	}{
		{"defaults", func(*Config) {}, ""},
		{"ipv6 loopback", func(c *Config) { c.KafkaAddr = "[::1]:9092" }, ""},
		{"localhost", func(c *Config) { c.SQSAddr = "localhost:9324" }, ""},
		{"other loopback", func(c *Config) { c.HTTPAddr = "127.0.0.2:8080" }, ""},
		{"all interfaces", func(c *Config) { c.KafkaAddr = "0.0.0.0:9092" }, "--kafka-addr"},
		{"empty host", func(c *Config) { c.SQSAddr = ":9324" }, "--sqs-addr"},
		{"ipv6 any", func(c *Config) { c.HTTPAddr = "[::]:8080" }, "--http-addr"},
		{"a lan address", func(c *Config) { c.MetricsAddr = "10.1.2.3:9100" }, "--metrics-addr"},
		{"a host name", func(c *Config) { c.HTTPAddr = "broker.example:8080" }, "--http-addr"},
		{"a tls listener", func(c *Config) {
			c.TLSCertFile, c.TLSKeyFile, c.KafkaTLSAddr = "c", "k", "0.0.0.0:9093"
		}, "--kafka-tls-addr"},
		{"override", func(c *Config) { c.KafkaAddr, c.InsecureAllowAnonymous = "0.0.0.0:9092", true }, ""},
		{"auth file", func(c *Config) { c.KafkaAddr, c.AuthFile = "0.0.0.0:9092", "users.yaml" }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults()
			tc.mutate(&c)
			err := c.Validate()
			if tc.refuse == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tc.refuse+":") ||
				!strings.Contains(err.Error(), "--auth-file") || !strings.Contains(err.Error(), "--insecure-allow-anonymous") {
				t.Fatalf("Validate = %v; want an error naming %s, --auth-file and --insecure-allow-anonymous", err, tc.refuse)
			}
		})
	}
}
