package server

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Listener names, as used by Addr, AdvertisedAddr and RegisterFrontend.
// A listener's flags are named after it: --<name>-addr,
// --<name>-advertised-addr.
const (
	HTTP  = "http"  // native API (Connect, gRPC, gRPC-Web); metrics and health unless Metrics is set
	Kafka = "kafka" // Kafka wire protocol
	SQS   = "sqs"   // Amazon SQS API

	// The TLS twins: the same front-end behind TLS (docs/security.md, "TLS").
	HTTPTLS  = "http-tls"
	KafkaTLS = "kafka-tls"
	SQSTLS   = "sqs-tls"

	// Metrics serves /metrics, /healthz and /readyz alone, when configured.
	Metrics = "metrics"

	// The cluster listener (replication between nodes) does not exist yet.
	// When it does, give it a name here, an address in Config and a case
	// in listenAddr, twin and isTLS: listen then wraps it in the same
	// guards and, if it is a TLS listener, the same reloaded certificate
	// (Server.TLS is the seam for its client side, which must present and
	// verify certificates too).
)

// listenerNames is every listener, in the order Start opens them: health
// first (it answers during recovery), then the native API, then the
// front-ends the setups registered.
var listenerNames = []string{Metrics, HTTP, HTTPTLS, Kafka, KafkaTLS, SQS, SQSTLS}

// isTLS reports whether listener name serves TLS.
func isTLS(name string) bool { return name == HTTPTLS || name == KafkaTLS || name == SQSTLS }

// twin is the plaintext listener whose settings (connection cap, metrics'
// timeouts) a TLS listener shares; a plaintext listener is its own.
func twin(name string) string {
	return strings.TrimSuffix(name, "-tls")
}

// listenAddr and advertised map a listener name to its settings.
func (c Config) listenAddr(name string) string {
	switch name {
	case HTTP:
		return c.HTTPAddr
	case Kafka:
		return c.KafkaAddr
	case SQS:
		return c.SQSAddr
	case HTTPTLS:
		return c.HTTPTLSAddr
	case KafkaTLS:
		return c.KafkaTLSAddr
	case SQSTLS:
		return c.SQSTLSAddr
	case Metrics:
		return c.MetricsAddr
	}
	return ""
}

func (c Config) advertised(name string) string {
	switch name {
	case HTTP:
		return c.HTTPAdvertisedAddr
	case Kafka:
		return c.KafkaAdvertisedAddr
	case SQS:
		return c.SQSAdvertisedAddr
	case HTTPTLS:
		return c.HTTPTLSAdvertisedAddr
	case KafkaTLS:
		return c.KafkaTLSAdvertisedAddr
	case SQSTLS:
		return c.SQSTLSAdvertisedAddr
	}
	return ""
}

// MaxConnections is the connection cap of listener name: the configured
// count, or AutoMaxConnections. A TLS listener has its plaintext twin's
// cap, of its own (the two do not share one count); the metrics listener
// has the HTTP listener's.
func (c Config) MaxConnections(name string) int {
	n := 0
	switch twin(name) {
	case HTTP, Metrics:
		n = c.HTTPMaxConnections
	case Kafka:
		n = c.KafkaMaxConnections
	case SQS:
		n = c.SQSMaxConnections
	}
	if n > 0 {
		return n
	}
	return AutoMaxConnections()
}

// AutoMaxConnections is the default cap of each listener: a quarter of the
// process's open-file limit (so the three listeners together leave at
// least a quarter of the descriptors for logs, journals and the rest), at
// least 64, and 4096 where the limit cannot be read.
func AutoMaxConnections() int {
	n, ok := openFileLimit()
	if !ok {
		return 4096
	}
	return int(max(64, min(n/4, 1<<20)))
}

// validateListeners checks every address, that something serves health,
// that TLS listeners have a certificate, and the safe default: without an
// auth file, nothing listens beyond loopback unless explicitly allowed.
func (c Config) validateListeners() error {
	for _, name := range listenerNames {
		for _, a := range [...]struct{ flag, v string }{
			{"--" + name + "-addr", c.listenAddr(name)}, {"--" + name + "-advertised-addr", c.advertised(name)},
		} {
			if a.v == "" {
				continue
			}
			host, port, err := net.SplitHostPort(a.v)
			if err != nil {
				return fmt.Errorf("%s: want host:port, got %q", a.flag, a.v)
			}
			if !strings.HasSuffix(a.flag, "-advertised-addr") {
				continue
			}
			// Told to clients (Kafka Metadata, SQS queue URLs, cluster forwarding): refused
			// here, before any listener opens, rather than when its front-end mounts.
			if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
				return fmt.Errorf("%s: host %q: clients cannot connect to it; give a name or address they can reach", a.flag, host)
			}
			if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
				return fmt.Errorf("%s: port %q: want 1 to 65535", a.flag, port)
			}
		}
	}
	if c.HTTPAddr == "" && c.HTTPTLSAddr == "" && c.MetricsAddr == "" {
		return errors.New("--http-addr: must not be empty (health, metrics and the native API live there) " +
			"unless --http-tls-addr or --metrics-addr is set")
	}
	if err := c.validateTLS(); err != nil {
		return err
	}
	return c.checkExposure()
}

func (c Config) validateTLS() error {
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return errors.New("--tls-cert and --tls-key: give both or neither")
	}
	if c.TLSClientCAFile != "" && c.TLSCertFile == "" {
		return errors.New("--tls-client-ca: needs --tls-cert and --tls-key (mutual TLS is TLS first)")
	}
	if c.TLSReloadInterval <= 0 {
		return fmt.Errorf("--tls-reload-interval: must be positive, got %s", c.TLSReloadInterval)
	}
	for _, name := range listenerNames {
		if isTLS(name) && c.listenAddr(name) != "" && c.TLSCertFile == "" {
			return fmt.Errorf("--%s-addr: a TLS listener needs --tls-cert and --tls-key", name)
		}
	}
	return nil
}

// checkExposure is the safe default of docs/security.md: with no auth
// file nobody is authenticated, so a listener beyond loopback would let
// anyone who can reach the machine read, write and delete everything.
func (c Config) checkExposure() error {
	if c.AuthFile != "" || c.InsecureAllowAnonymous {
		return nil
	}
	for _, name := range listenerNames {
		addr := c.listenAddr(name)
		if addr == "" || IsLoopback(addr) {
			continue
		}
		if name == Metrics { // it serves no queue or topic, but names them all
			return fmt.Errorf("--metrics-addr: %s is not a loopback address, and no --auth-file is set: anyone who can reach it "+
				"could read /metrics, which names every queue, topic and consumer group; bind 127.0.0.1, ::1 or localhost "+
				"(or a private interface with --insecure-allow-anonymous), or set --auth-file", addr)
		}
		return fmt.Errorf("--%s-addr: %s is not a loopback address, and no --auth-file is set, so anyone who can reach it "+
			"could read, write and delete every queue and topic; bind 127.0.0.1, ::1 or localhost, set --auth-file, "+
			"or pass --insecure-allow-anonymous to accept that", name, addr)
	}
	return nil
}

// IsLoopback reports whether the host of addr (host:port) is a loopback
// address or "localhost". An empty host means every interface, so it is
// not; nor is any other name, which may resolve to anything.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// exposed lists the listeners bound beyond loopback, for the warning
// --insecure-allow-anonymous logs at every start.
func (c Config) exposed() []string {
	var out []string
	for _, name := range listenerNames {
		if addr := c.listenAddr(name); addr != "" && !IsLoopback(addr) {
			out = append(out, name+"="+addr)
		}
	}
	return out
}
