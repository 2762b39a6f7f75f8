// Package tlstest makes certificates for tests with openssl (Debian's
// package, as an operator would): a CA, and server or client certificates
// it signs, valid for 127.0.0.1, ::1 and localhost. Tests that need TLS
// use it so that what they load is what openssl writes, not what Go's own
// encoder would.
//
// It is test support: it must never be imported by the broker, the server
// or the binaries.
package tlstest

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// CA is a certificate authority in Dir (ca.crt, ca.key).
type CA struct {
	Dir, Cert, Key string
}

// Pair is a certificate and its key, as files.
type Pair struct {
	Cert, Key string
}

// Available reports whether openssl can be run; without it a test calls
// testproc.Missing (it fails unless SLUICE_ALLOW_MISSING_CLIENTS=1;
// scripts/test-deps.sh installs openssl).
func Available() error {
	_, err := exec.LookPath("openssl")
	return err
}

func openssl(dir string, args ...string) error {
	cmd := exec.Command("openssl", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("openssl %v: %w\n%s", args, err, out)
	}
	return nil
}

// ecKey makes openssl generate a P-256 key: fast, and what most operators
// are given today.
var ecKey = []string{"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-noenc"}

// NewCA makes a self-signed CA whose subject CN is name, in dir.
func NewCA(dir, name string) (*CA, error) {
	ca := &CA{Dir: dir, Cert: filepath.Join(dir, name+"-ca.crt"), Key: filepath.Join(dir, name+"-ca.key")}
	args := append([]string{"req", "-x509"}, ecKey...)
	args = append(args, "-keyout", ca.Key, "-out", ca.Cert, "-days", "2", "-subj", "/CN="+name,
		"-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
	if err := openssl(dir, args...); err != nil {
		return nil, err
	}
	return ca, nil
}

// Issue makes name.crt and name.key in the CA's directory: subject CN cn,
// the given serial, usable by a server (for 127.0.0.1, ::1, localhost)
// and by a client.
func (ca *CA) Issue(name, cn string, serial int64) (Pair, error) {
	p := Pair{Cert: filepath.Join(ca.Dir, name+".crt"), Key: filepath.Join(ca.Dir, name+".key")}
	csr := filepath.Join(ca.Dir, name+".csr")
	ext := filepath.Join(ca.Dir, name+".ext")
	if err := os.WriteFile(ext, []byte("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"+
		"extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\n"), 0o600); err != nil {
		return p, err
	}
	args := append([]string{"req"}, ecKey...)
	if err := openssl(ca.Dir, append(args, "-keyout", p.Key, "-out", csr, "-subj", "/CN="+cn)...); err != nil {
		return p, err
	}
	err := openssl(ca.Dir, "x509", "-req", "-in", csr, "-CA", ca.Cert, "-CAkey", ca.Key,
		"-set_serial", strconv.FormatInt(serial, 10), "-days", "2", "-extfile", ext, "-out", p.Cert)
	return p, err
}

// Pool is a pool holding the CA, for a client's RootCAs or a server's
// ClientCAs.
func (ca *CA) Pool() (*x509.CertPool, error) {
	b, err := os.ReadFile(ca.Cert)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, errors.New("tlstest: no certificate in " + ca.Cert)
	}
	return pool, nil
}

// ClientConfig trusts the CA and, if client is not the zero Pair, presents
// it as the client's certificate.
func (ca *CA) ClientConfig(client Pair) (*tls.Config, error) {
	pool, err := ca.Pool()
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if client != (Pair{}) {
		c, err := tls.LoadX509KeyPair(client.Cert, client.Key)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg, nil
}

// Install copies p over the files certPath and keyPath, each replaced by
// a rename, key first, as a careful operator would: a reader sees the old
// or the new file, never half of one (but may see the new key beside the
// old certificate for a moment).
func Install(p Pair, certPath, keyPath string) error {
	for _, f := range []struct{ from, to string }{{p.Key, keyPath}, {p.Cert, certPath}} {
		b, err := os.ReadFile(f.from)
		if err != nil {
			return err
		}
		tmp := f.to + ".tmp"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, f.to); err != nil {
			return err
		}
	}
	return nil
}
