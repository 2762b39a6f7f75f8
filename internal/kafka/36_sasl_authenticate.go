package kafka

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleSASLAuthenticate carries one token of the exchange a handshake v1
// chose (sasl.go). On success v1+ reports the session's lifetime (KIP-368);
// a failure answers SASL_AUTHENTICATION_FAILED with a message (and SCRAM's
// e= bytes) and closes the connection. Out of order it answers
// ILLEGAL_SASL_STATE: closing, unless the connection is already
// authenticated (or authentication is off), as Kafka does.
func handleSASLAuthenticate(_ context.Context, c *conn, req *kmsg.SASLAuthenticateRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	if c.s.cfg.Auth == nil || c.sasl.mech == "" || c.sasl.raw {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		m := "SaslAuthenticate without a SaslHandshake v1 before it"
		if c.s.cfg.Auth == nil {
			m = "authentication is off on this listener"
		}
		resp.ErrorMessage = &m
		if c.s.cfg.Auth == nil || (c.sasl.authenticated && c.sasl.mech == "") {
			return msg(resp)
		}
		return reply{msg: resp, closeAfter: fmt.Errorf("%w: %s", errSASLState, m)}, nil
	}
	out, done, fail := c.saslStep(req.SASLAuthBytes)
	if fail != nil {
		c.failed(fail)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = &fail.msg
		resp.SASLAuthBytes = fail.resp
		return reply{msg: resp, closeAfter: fmt.Errorf("%w: %s", errSASLFailed, fail.msg)}, nil
	}
	resp.SASLAuthBytes = out
	if done {
		resp.SessionLifetimeMillis = c.sessionLifetimeMillis()
	}
	return msg(resp)
}
