package tlsconf

import (
	"crypto/tls"
	"net"
)

// Principal is the principal a TLS client proved it is: the subject Common
// Name of its certificate, if that certificate chained to --tls-client-ca
// in the handshake. ok is false for a connection without TLS, without a
// client certificate, or whose certificate was not verified (no client CA
// configured) or has an empty Common Name. Only a verified chain counts:
// an unverified certificate's subject is whatever the client wrote.
func Principal(cs *tls.ConnectionState) (name string, ok bool) {
	if cs == nil || !cs.HandshakeComplete || len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return "", false
	}
	cn := cs.VerifiedChains[0][0].Subject.CommonName
	return cn, cn != ""
}

// ConnPrincipal is Principal for a connection accepted on a TLS listener
// (a Kafka connection, say): nc must be the *tls.Conn the listener
// returned and its handshake done, which it is once the first request has
// been read from it. Anything else has no principal.
func ConnPrincipal(nc net.Conn) (string, bool) {
	tc, ok := nc.(*tls.Conn)
	if !ok {
		return "", false
	}
	cs := tc.ConnectionState()
	return Principal(&cs)
}
