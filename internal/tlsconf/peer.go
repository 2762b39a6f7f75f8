package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
)

// Mutual TLS between the nodes of a cluster (--cluster-tls-cert, --cluster-tls-key,
// --cluster-tls-ca; docs/cluster.md, "Transport security"): every node is both a server
// (it accepts its peers' connections) and a client (it dials them), presents its node
// certificate both ways, and accepts only a peer whose certificate chains to the cluster
// CA — the reloader's client CA file, required here. Both halves read the current
// material at each handshake, so a reload (SIGHUP, or changed files) reaches the next
// connection, certificate and CA alike. TLS 1.3 only: both ends are sluice.

// ErrNoPeerCA: mutual TLS between nodes needs the CA file.
var ErrNoPeerCA = errors.New("tls: mutual TLS between nodes needs a CA file")

// PeerServerConfig is the accepting half: a client certificate is required and must
// chain to the CA.
func (r *Reloader) PeerServerConfig() (*tls.Config, error) {
	if r.cur.Load().clientCAs == nil {
		return nil, ErrNoPeerCA
	}
	get := func(*tls.ClientHelloInfo) (*tls.Config, error) {
		m := r.cur.Load()
		return &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{m.cert},
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: m.clientCAs}, nil
	}
	base, _ := get(nil)
	base.GetConfigForClient = get
	return base, nil
}

// PeerClientConfig is the dialling half: it presents the current certificate, and
// verifies the peer's chain against the current CA (Go's own verification would pin the
// CA pool of the config it was given, so it is done here, in VerifyConnection, with Go's
// chain, validity and server key usage checks; InsecureSkipVerify only hands that job
// over, and a handshake VerifyConnection refuses fails). The name dialled is not
// checked: a peer is identified by the node its certificate names (the caller's
// VerifyPeer, PeerName), not by an address, so node certificates need no IP or DNS
// names, and a node whose address changes keeps its certificate.
func (r *Reloader) PeerClientConfig() (*tls.Config, error) {
	if r.cur.Load().clientCAs == nil {
		return nil, ErrNoPeerCA
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			m := r.cur.Load()
			return &m.cert, nil
		},
		InsecureSkipVerify: true, // verified in VerifyConnection, against the current CA
		VerifyConnection:   func(cs tls.ConnectionState) error { return r.verifyServer(cs) },
	}, nil
}

func (r *Reloader) verifyServer(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: the peer presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: r.cur.Load().clientCAs,
		Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		return fmt.Errorf("tls: the peer's certificate: %w", err)
	}
	return nil
}

// PeerName is the subject Common Name of the certificate the other end of a connection
// made with the Peer configs presented (verified by the handshake either way), "" if
// none.
func PeerName(cs tls.ConnectionState) string {
	if !cs.HandshakeComplete || len(cs.PeerCertificates) == 0 {
		return ""
	}
	return cs.PeerCertificates[0].Subject.CommonName
}
