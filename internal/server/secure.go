package server

import (
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/sluice-mq/sluice/internal/metrics"
	"github.com/sluice-mq/sluice/internal/tlsconf"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// loadTLS loads the certificate every TLS listener serves, so a server
// whose files do not load does not start.
func (s *Server) loadTLS() error {
	if s.cfg.TLSCertFile == "" {
		return nil
	}
	r, err := tlsconf.New(tlsconf.Options{
		CertFile: s.cfg.TLSCertFile, KeyFile: s.cfg.TLSKeyFile, ClientCAFile: s.cfg.TLSClientCAFile,
		Logger: s.log,
		OnReload: func(leaf *x509.Certificate, err error) {
			s.metrics.ObserveTLSReload(leaf.NotAfter, err)
		},
	})
	if err != nil {
		return err
	}
	s.tls = r
	s.metrics.ObserveTLSCertificate(r.Leaf().NotAfter)
	return nil
}

// tlsListener puts TLS on a guarded listener: ALPN offers HTTP/2 and
// HTTP/1.1 on an HTTP listener (nothing on Kafka's), a clear-text HTTP
// request gets net/http's 400, and handshakes are bounded by the
// read-header timeout and counted when they fail.
func (s *Server) tlsListener(name string, ln net.Listener, isHTTP bool, m *metrics.Listener) net.Listener {
	var alpn []string
	plain := ""
	if isHTTP {
		alpn, plain = []string{"h2", "http/1.1"}, plainToTLSAnswer
	}
	return newHandshakeListener(ln, s.tls.ServerConfig(alpn...), s.cfg.ReadHeaderTimeout, name, plain, s.log, m.HandshakeFailed)
}

// TLS is the reloader behind every TLS listener, nil without --tls-cert.
// Front-ends need nothing from it (tlsconf.Principal reads a connection);
// it is the seam for a future cluster listener and its client side.
func (s *Server) TLS() *tlsconf.Reloader { return s.tls }

// watchTLS reloads the certificate on SIGHUP and when its files change,
// until the shutdown's end.
func (s *Server) watchTLS() {
	if s.tls == nil {
		return
	}
	if s.cfg.HTTPTLSAddr == "" && s.cfg.KafkaTLSAddr == "" && s.cfg.SQSTLSAddr == "" {
		s.log.Warn("--tls-cert is set but no TLS listener is: give --http-tls-addr, --kafka-tls-addr or --sqs-tls-addr")
	}
	s.serveWG.Go(s.tls.Watch(s.base, s.cfg.TLSReloadInterval))
}

// prepareDataDir creates the data directory private (0700), and warns if
// an existing one lets other users in: its files hold every message.
func (s *Server) prepareDataDir() error {
	if err := os.MkdirAll(s.cfg.DataDir, vfs.DirPerm); err != nil {
		return fmt.Errorf("--data-dir: %w", err)
	}
	st, err := os.Stat(s.cfg.DataDir)
	if err != nil {
		return fmt.Errorf("--data-dir: %w", err)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		s.log.Warn("data directory is open to other users; chmod 700 it (new files are created 0600 anyway)",
			"data_dir", s.cfg.DataDir, "mode", fmt.Sprintf("%#o", perm))
	}
	return nil
}

// warnExposure logs, at every start, what --insecure-allow-anonymous lets
// through: listeners beyond loopback with no authentication.
func (s *Server) warnExposure() {
	if !s.cfg.InsecureAllowAnonymous || s.cfg.AuthFile != "" {
		return
	}
	exposed := s.cfg.exposed()
	if len(exposed) == 0 {
		s.log.Warn("--insecure-allow-anonymous is set but every listener is on loopback; it changes nothing")
		return
	}
	s.log.Warn("--insecure-allow-anonymous: no --auth-file, so anyone who can reach these listeners can read, "+
		"write and delete every queue and topic", "listeners", strings.Join(exposed, " "))
}
