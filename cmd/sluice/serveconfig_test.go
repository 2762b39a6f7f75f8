package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/server"
)

// resolve parses args as `sluice serve` would, with env as the whole
// environment, and returns the resolved config.
func resolve(t *testing.T, args []string, env map[string]string) (server.Config, error) {
	t.Helper()
	cmd := newServeCmd()
	if err := cmd.ParseFlags(args); err != nil {
		return server.Config{}, err
	}
	return resolveServeConfig(cmd.Flags(), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestServeConfigPrecedence(t *testing.T) {
	file := writeFile(t, "data-dir: /from/file\nfsync: 1s\nlog-level: debug\nmax-request-bytes: 1KiB\n")
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want func(*server.Config)
	}{
		{"defaults", nil, nil, func(*server.Config) {}},
		{"file over defaults", []string{"--config", file}, nil, func(c *server.Config) {
			c.DataDir, c.Fsync, c.LogLevel, c.MaxRequestBytes = "/from/file", "1s", "debug", 1024
		}},
		{"config path from env", nil, map[string]string{"SLUICE_CONFIG": file}, func(c *server.Config) {
			c.DataDir, c.Fsync, c.LogLevel, c.MaxRequestBytes = "/from/file", "1s", "debug", 1024
		}},
		{"env over file", []string{"--config", file}, map[string]string{"SLUICE_FSYNC": "never", "SLUICE_LOG_LEVEL": "warn"}, func(c *server.Config) {
			c.DataDir, c.Fsync, c.LogLevel, c.MaxRequestBytes = "/from/file", "never", "warn", 1024
		}},
		{"flag over env over file", []string{"--config", file, "--log-level", "error", "--kafka-addr", ""},
			map[string]string{"SLUICE_FSYNC": "never", "SLUICE_LOG_LEVEL": "warn"}, func(c *server.Config) {
				c.DataDir, c.Fsync, c.LogLevel, c.MaxRequestBytes, c.KafkaAddr = "/from/file", "never", "error", 1024, ""
			}},
		{"env only", nil, map[string]string{"SLUICE_HTTP_ADDR": "0.0.0.0:80", "SLUICE_SHUTDOWN_TIMEOUT": "3s",
			"SLUICE_INSECURE_ALLOW_ANONYMOUS": "true"}, func(c *server.Config) {
			c.HTTPAddr, c.ShutdownTimeout, c.InsecureAllowAnonymous = "0.0.0.0:80", 3*time.Second, true
		}},
		{"bare bool flag", []string{"--kafka-addr", "[::]:9092", "--insecure-allow-anonymous"}, nil, func(c *server.Config) {
			c.KafkaAddr, c.InsecureAllowAnonymous = "[::]:9092", true
		}},
		{"tls listeners", []string{"--kafka-tls-addr", "127.0.0.1:9093", "--tls-cert", "/c.pem", "--tls-key", "/k.pem",
			"--metrics-addr", "localhost:9100"},
			map[string]string{"SLUICE_SQS_TLS_ADDR": "127.0.0.1:9325", "SLUICE_TLS_CLIENT_CA": "/ca.pem",
				"SLUICE_KAFKA_TLS_ADVERTISED_ADDR": "kafka.internal:9093", "SLUICE_TLS_RELOAD_INTERVAL": "1m"},
			func(c *server.Config) {
				c.KafkaTLSAddr, c.SQSTLSAddr, c.MetricsAddr = "127.0.0.1:9093", "127.0.0.1:9325", "localhost:9100"
				c.TLSCertFile, c.TLSKeyFile, c.TLSClientCAFile = "/c.pem", "/k.pem", "/ca.pem"
				c.KafkaTLSAdvertisedAddr, c.TLSReloadInterval = "kafka.internal:9093", time.Minute
			}},
		{"preallocation off", []string{"--preallocate", "0"}, nil, func(c *server.Config) { c.PreallocateBytes = 0 }},
		{"preallocation from env", nil, map[string]string{"SLUICE_PREALLOCATE": "4MiB"}, func(c *server.Config) { c.PreallocateBytes = 4 << 20 }},
		{"advertised addresses", []string{"--kafka-advertised-addr", "kafka.internal:9092"},
			map[string]string{"SLUICE_SQS_ADVERTISED_ADDR": "sqs.internal:9324"}, func(c *server.Config) {
				c.KafkaAdvertisedAddr, c.SQSAdvertisedAddr = "kafka.internal:9092", "sqs.internal:9324"
			}},
		{"connection limits", []string{"--kafka-max-connections", "500", "--read-body-timeout", "5s", "--sqs-max-connections", "auto"},
			map[string]string{"SLUICE_KAFKA_CONNECTIONS_MAX_IDLE": "1m", "SLUICE_HTTP_MAX_CONNECTIONS": "64", "SLUICE_SQS_MAX_CONNECTIONS": "7"},
			func(c *server.Config) {
				c.KafkaMaxConnections, c.HTTPMaxConnections, c.SQSMaxConnections = 500, 64, 0
				c.ReadBodyTimeout, c.KafkaMaxIdle = 5*time.Second, time.Minute
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolve(t, tc.args, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			want := server.Defaults()
			tc.want(&want)
			if got != want {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestServeConfigRejectsBadValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		file string
		want string // the one-line error must contain this
	}{
		{"bad fsync flag", []string{"--fsync", "sometimes"}, nil, "", "--fsync: want always, never or a positive duration"},
		{"bad fsync env", nil, map[string]string{"SLUICE_FSYNC": "0s"}, "", "--fsync (from SLUICE_FSYNC): want always"},
		{"bad fsync in file", nil, nil, "fsync: sometimes\n", "--fsync (from config file"},
		{"bad fsync env, flag wins", []string{"--fsync", "sometimes"}, map[string]string{"SLUICE_FSYNC": "0s"}, "", "--fsync: want always"},
		{"bad log level", []string{"--log-level", "loud"}, nil, "", "--log-level:"},
		{"bad log format", nil, map[string]string{"SLUICE_LOG_FORMAT": "xml"}, "", "--log-format (from SLUICE_LOG_FORMAT): want text or json"},
		{"bad address", []string{"--sqs-addr", "9324"}, nil, "", "--sqs-addr: want host:port"},
		{"metrics beyond loopback", []string{"--metrics-addr", "0.0.0.0:9100"}, nil, "", "--metrics-addr: 0.0.0.0:9100 is not a loopback address, and no --auth-file is set: anyone who can reach it could read /metrics"},
		{"unspecified advertised host", []string{"--kafka-advertised-addr", "0.0.0.0:9092"}, nil, "", `--kafka-advertised-addr: host "0.0.0.0": clients cannot connect to it`},
		{"advertised port 0", nil, map[string]string{"SLUICE_SQS_ADVERTISED_ADDR": "localhost:0"}, "", `--sqs-advertised-addr (from SLUICE_SQS_ADVERTISED_ADDR): port "0"`},
		{"bad size in env", nil, map[string]string{"SLUICE_MAX_REQUEST_BYTES": "lots"}, "", "--max-request-bytes (from SLUICE_MAX_REQUEST_BYTES)"},
		{"negative size", []string{"--max-request-bytes", "-5"}, nil, "", "--max-request-bytes (from command line)"},
		{"bad duration in file", nil, nil, "shutdown-timeout: soon\n", "--shutdown-timeout (from config file"},
		{"unknown key in file", nil, nil, "data_dir: /x\n", `unknown key "data_dir"`},
		{"list in file", nil, nil, "data-dir: [a, b]\n", "data-dir must be a single value"},
		{"malformed file", nil, nil, "data-dir: : :\n", "config file"},
		{"missing file", []string{"--config", "/nonexistent/sluice.yaml"}, nil, "", "--config:"},
		{"unknown flag", []string{"--data-dri", "x"}, nil, "", "unknown flag: --data-dri"},
		{"zero connections", []string{"--kafka-max-connections", "0"}, nil, "", "--kafka-max-connections (from command line): want auto or a positive count"},
		{"word for connections", nil, map[string]string{"SLUICE_HTTP_MAX_CONNECTIONS": "many"}, "", "--http-max-connections (from SLUICE_HTTP_MAX_CONNECTIONS)"},
		{"zero idle", []string{"--kafka-connections-max-idle", "0s"}, nil, "", "--kafka-connections-max-idle: must be positive"},
		{"bad body timeout", nil, nil, "read-body-timeout: slow\n", "--read-body-timeout (from config file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = append(args, "--config", writeFile(t, tc.file))
			}
			_, err := resolve(t, args, tc.env)
			if err == nil {
				t.Fatalf("accepted; want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q: want one line containing %q", err, tc.want)
			}
		})
	}
}

func TestParseBytesRoundTrip(t *testing.T) {
	for in, want := range map[string]int64{"1": 1, "1024": 1024, "1KiB": 1024, "16MiB": 16 << 20, "2GiB": 2 << 30, "3 MiB": 3 << 20, "7B": 7} {
		got, err := parseBytes(in)
		if err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
		if back, _ := parseBytes(formatBytes(got)); back != got {
			t.Errorf("formatBytes(%d) = %q does not parse back", got, formatBytes(got))
		}
	}
	for _, bad := range []string{"", "0", "-1", "1TiB", "1.5MiB", "MiB", "99999999999GiB"} {
		if _, err := parseBytes(bad); err == nil {
			t.Errorf("parseBytes(%q) accepted", bad)
		}
	}
}
