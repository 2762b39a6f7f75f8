package kafka

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleSASLHandshake chooses the mechanism of the exchange that follows
// (sasl.go): in SaslAuthenticate requests after v1, in raw tokens after
// v0. An unknown mechanism answers UNSUPPORTED_SASL_MECHANISM with the
// list and closes; with an exchange already pending, ILLEGAL_SASL_STATE
// and close. With authentication off the answer is ILLEGAL_SASL_STATE
// and the connection stays, as Kafka answers a handshake on a listener
// without SASL. A re-authentication (KIP-368) must keep the mechanism of
// the first exchange.
func handleSASLHandshake(_ context.Context, c *conn, req *kmsg.SASLHandshakeRequest) (reply, error) {
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = saslMechanisms
	switch {
	case c.s.cfg.Auth == nil:
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return msg(resp)
	case c.sasl.mech != "":
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return reply{msg: resp, closeAfter: fmt.Errorf("%w: a second SaslHandshake before the exchange ended", errSASLState)}, nil
	case !slices.Contains(saslMechanisms, req.Mechanism),
		c.sasl.viaSASL && req.Mechanism != c.sasl.mechWas:
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return reply{msg: resp, closeAfter: fmt.Errorf("%w: mechanism %q", errSASLFailed, req.Mechanism)}, nil
	}
	c.sasl.mech = req.Mechanism
	c.sasl.raw = req.Version == 0
	return msg(resp)
}
