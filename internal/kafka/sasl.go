package kafka

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/tlsconf"
)

// Authentication of a connection (docs/security.md, ## Kafka).
//
// With Config.Auth set, a connection starts anonymous and may send only
// ApiVersions, SaslHandshake and SaslAuthenticate; any other request closes
// it before its body is even decoded, as Kafka does, so nothing from an
// unauthenticated client reaches the broker. SaslHandshake picks the
// mechanism; the exchange then runs in SaslAuthenticate requests (handshake
// v1) or in raw size-prefixed SASL tokens with no Kafka header (handshake
// v0, still sent by old clients). A failed exchange answers
// SASL_AUTHENTICATION_FAILED (or, raw, the SCRAM e= message) and closes.
//
// A session lasts Config.SessionLifetime (KIP-368): SaslAuthenticate v1+
// tells the client, which re-authenticates on the same connection before
// it ends; a request after the end closes the connection. A connection
// with a verified TLS client certificate is authenticated as the
// certificate's Common Name from its first request, without SASL.

// Mechanisms served, in the order SaslHandshake lists them.
const (
	mechPlain     = "PLAIN"
	mechSCRAM256  = string(auth.SCRAMSHA256)
	mechSCRAM512  = string(auth.SCRAMSHA512)
	saslProtocol  = "kafka" // the auth-failure metric's protocol label
	defaultReauth = time.Hour

	defaultFailedAuthDelay = 100 * time.Millisecond
)

var saslMechanisms = []string{mechPlain, mechSCRAM256, mechSCRAM512}

// saslState is a connection's authentication, owned by its goroutine.
type saslState struct {
	principal     auth.Principal // who the requests run as; "" until authenticated
	authenticated bool
	viaSASL       bool      // principal came from SASL (a re-auth must keep it)
	expires       time.Time // session end; zero: no end (mTLS, or no lifetime)
	tlsChecked    bool

	mech    string // chosen by the pending handshake; "" when none is pending
	mechWas string // the mechanism of the last successful exchange
	raw     bool   // handshake v0: the next frames are raw SASL tokens
	scram   *auth.SCRAMServer
}

var (
	errUnauthenticated = errors.New("request before SASL authentication")
	errSessionExpired  = errors.New("SASL session expired without re-authentication")
	errSASLFailed      = errors.New("SASL authentication failed")
	errSASLState       = errors.New("SASL request out of order")
)

// saslKeys may be sent before authenticating.
func preAuth(key int16) bool {
	return key == kmsg.ApiVersions.Int16() || key == kmsg.SASLHandshake.Int16() || key == kmsg.SASLAuthenticate.Int16()
}

func (s *Server) now() time.Time { return s.cfg.Now() }

// admit decides, from the API key alone, whether a request may be decoded
// and handled: always with authentication off; before authenticating
// only the SASL requests; after the session's end only a re-auth.
func (c *conn) admit(key int16) error {
	st := c.s.cfg.Auth
	if st == nil {
		return nil
	}
	if !c.sasl.tlsChecked {
		c.sasl.tlsChecked = true
		if p := tlsPrincipal(c.nc); p != auth.Anonymous {
			c.sasl.principal, c.sasl.authenticated = p, true
		}
	}
	if preAuth(key) {
		return nil
	}
	if !c.sasl.authenticated {
		st.Fail(saslProtocol, auth.ReasonNoCredentials, auth.Anonymous, c.peer(), kmsg.NameForKey(key))
		return fmt.Errorf("%w: %s", errUnauthenticated, kmsg.NameForKey(key))
	}
	if !c.sasl.expires.IsZero() && !c.s.now().Before(c.sasl.expires) {
		st.Fail(saslProtocol, auth.ReasonExpired, c.sasl.principal, c.peer(), kmsg.NameForKey(key))
		return errSessionExpired
	}
	return nil
}

func (c *conn) peer() string { return c.nc.RemoteAddr().String() }

// tlsPrincipal is the Common Name of a verified client certificate, or
// anonymous. Called after the first request was read, so the handshake is
// complete.
func tlsPrincipal(nc net.Conn) auth.Principal {
	cn, _ := tlsconf.ConnPrincipal(nc)
	return auth.Principal(cn)
}

// saslFailure is a failed exchange: msg for SaslAuthenticate's
// error_message, resp the SASL bytes still owed to the client (SCRAM's
// e= server-final message), reason the metric's.
type saslFailure struct {
	msg    string
	resp   []byte
	reason string
	user   string
}

func (f *saslFailure) Error() string { return f.msg }

// saslStep feeds one client token to the pending exchange and returns the
// server's token; done once the connection is authenticated.
func (c *conn) saslStep(token []byte) (resp []byte, done bool, fail *saslFailure) {
	st := c.s.cfg.Auth
	switch c.sasl.mech {
	case mechPlain:
		user, ok := c.plain(token)
		if !ok {
			return nil, false, &saslFailure{msg: "Authentication failed: invalid username or password",
				reason: auth.ReasonBadCredentials, user: user}
		}
		return nil, true, c.authenticated(user)
	case mechSCRAM256, mechSCRAM512:
		if c.sasl.scram == nil {
			c.sasl.scram, _ = auth.NewSCRAMServer(auth.Mechanism(c.sasl.mech), st.SCRAM)
		}
		resp, done, err := c.sasl.scram.Step(token)
		if err != nil {
			var se *auth.SCRAMError
			reason := auth.ReasonBadCredentials
			if errors.As(err, &se) && se.Malformed() {
				reason = auth.ReasonMalformed
			}
			return resp, false, &saslFailure{msg: "Authentication failed during authentication due to invalid credentials with SASL mechanism " + c.sasl.mech,
				resp: resp, reason: reason, user: c.sasl.scram.User()}
		}
		if !done {
			return resp, false, nil
		}
		return resp, true, c.authenticated(c.sasl.scram.User())
	}
	return nil, false, &saslFailure{msg: "no SASL mechanism was chosen: send SaslHandshake first", reason: auth.ReasonMalformed}
}

// plain checks a PLAIN token, "authzid NUL user NUL password" (RFC 4616);
// an authzid other than the user is refused, as Kafka refuses it.
func (c *conn) plain(token []byte) (string, bool) {
	parts := bytes.Split(token, []byte{0})
	if len(parts) != 3 || len(parts[1]) == 0 {
		return "", false
	}
	user := string(parts[1])
	if len(parts[0]) != 0 && string(parts[0]) != user {
		return user, false
	}
	_, ok := c.s.cfg.Auth.Password(user, string(parts[2]))
	return user, ok
}

// authenticated ends a successful exchange: the connection runs as user
// for a new session. A re-authentication must keep the principal.
func (c *conn) authenticated(user string) *saslFailure {
	p := auth.Principal(user)
	if c.sasl.viaSASL && p != c.sasl.principal {
		return &saslFailure{msg: fmt.Sprintf("cannot change principal from %q to %q during re-authentication", c.sasl.principal, p),
			reason: auth.ReasonBadCredentials, user: user}
	}
	c.sasl.principal, c.sasl.authenticated, c.sasl.viaSASL = p, true, true
	c.sasl.mechWas, c.sasl.mech, c.sasl.scram, c.sasl.raw = c.sasl.mech, "", nil, false
	c.sasl.expires = time.Time{}
	if c.s.cfg.SessionLifetime > 0 {
		c.sasl.expires = c.s.now().Add(c.s.cfg.SessionLifetime)
	}
	return nil
}

// failed records a failed exchange (counted and logged by the store) and
// holds the answer for FailedAuthDelay, or until shutdown.
func (c *conn) failed(f *saslFailure) {
	c.s.cfg.Auth.Fail(saslProtocol, f.reason, auth.Principal(f.user), c.peer(), "SASL "+c.sasl.mech)
	if d := c.s.cfg.FailedAuthDelay; d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-c.s.ctx.Done():
		}
	}
}

// sessionLifetimeMillis is what SaslAuthenticate v1+ reports: the time
// left in the session, 0 for none.
func (c *conn) sessionLifetimeMillis() int64 {
	if c.sasl.expires.IsZero() {
		return 0
	}
	return max(c.sasl.expires.Sub(c.s.now()).Milliseconds(), 1)
}

// handleRawSASL runs one raw token of a handshake-v0 exchange: the reply
// is a size-prefixed token (empty for PLAIN's success), a failure closes
// the connection after SCRAM's e= message.
func (c *conn) handleRawSASL(token []byte) error {
	resp, done, fail := c.saslStep(token)
	if fail != nil {
		c.failed(fail)
		if fail.resp != nil {
			_ = c.writeRaw(fail.resp)
		}
		return fmt.Errorf("%w (raw, %s): %s", errSASLFailed, c.sasl.mech, fail.msg)
	}
	if done {
		c.sasl.raw = false
	}
	return c.writeRaw(resp)
}

func (c *conn) writeRaw(b []byte) error {
	c.armWrite()
	buf := binary.BigEndian.AppendUint32(c.out[:0], uint32(len(b)))
	buf = append(buf, b...)
	_, err := c.nc.Write(buf)
	return err
}
