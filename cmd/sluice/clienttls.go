package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// clientTLS is how a client command reaches an https:// server: a private
// CA to trust, and a client certificate for mutual TLS (whose CN the
// server takes as the principal; docs/security.md).
type clientTLS struct {
	ca, cert, key string
	config        *tls.Config // nil: Go's defaults (the system's roots, no certificate)
}

func (c *clientTLS) addFlags(cmd *cobra.Command) {
	fl := cmd.PersistentFlags()
	fl.StringVar(&c.ca, "tls-ca", os.Getenv("SLUICE_TLS_CA"), "PEM `file` of the CA(s) to trust for an https:// server, instead of the system's [env SLUICE_TLS_CA]")
	fl.StringVar(&c.cert, "tls-client-cert", os.Getenv("SLUICE_TLS_CLIENT_CERT"), "PEM `file` of a client certificate for mutual TLS [env SLUICE_TLS_CLIENT_CERT]")
	fl.StringVar(&c.key, "tls-client-key", os.Getenv("SLUICE_TLS_CLIENT_KEY"), "PEM `file` of the client certificate's key [env SLUICE_TLS_CLIENT_KEY]")
}

// load reads the files the flags name.
func (c *clientTLS) load() error {
	if c.ca == "" && c.cert == "" && c.key == "" {
		return nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.ca != "" {
		pem, err := os.ReadFile(c.ca)
		if err != nil {
			return fmt.Errorf("--tls-ca: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--tls-ca %s: no PEM certificate in it", c.ca)
		}
	}
	if (c.cert == "") != (c.key == "") {
		return errors.New("--tls-client-cert and --tls-client-key go together")
	}
	if c.cert != "" {
		pair, err := tls.LoadX509KeyPair(c.cert, c.key)
		if err != nil {
			return fmt.Errorf("--tls-client-cert/--tls-client-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	c.config = cfg
	return nil
}
