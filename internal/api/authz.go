package api

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/tlsconf"
)

// Authentication and authorization of every call, before its handler runs:
// a refused call never reaches the broker. The caller is a bearer token's
// user (Authorization: Bearer <token>) or, without that header, the Common
// Name of a verified TLS client certificate. What each call needs is
// requirements' table (authz_rules.go).

// Reasons of refused calls.
const (
	ReasonUnauthenticated  = "UNAUTHENTICATED"
	ReasonPermissionDenied = "PERMISSION_DENIED"
)

type ctxKey int

const (
	tlsKey ctxKey = iota
	callerKey
)

// caller is who made a call, for the checks a handler makes itself.
type caller struct {
	p    auth.Principal
	peer string
}

// withConnState hands the request's TLS state to the interceptor, which
// Connect does not show it.
func withConnState(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil {
			r = r.WithContext(context.WithValue(r.Context(), tlsKey, r.TLS))
		}
		h.ServeHTTP(w, r)
	})
}

// certPrincipal is the principal of a verified client certificate: its
// subject's Common Name. An unverified certificate (a listener that asks
// for one but does not check it) is no principal.
func certPrincipal(cs *tls.ConnectionState) (auth.Principal, bool) {
	cn, ok := tlsconf.Principal(cs)
	return auth.Principal(cn), ok
}

// principalOf is the caller authenticate found (Anonymous with
// authentication off).
func principalOf(ctx context.Context) auth.Principal {
	c, _ := ctx.Value(callerKey).(caller)
	return c.p
}

// authenticate finds the caller. A token that is present must be good,
// even beside a client certificate: a client that sends a credential
// means it, and a wrong one is an error it should see.
func (a *API) authenticate(ctx context.Context, h http.Header, peer, procedure string) (auth.Principal, error) {
	if !a.auth.Enabled() {
		return auth.Anonymous, nil
	}
	if node := peerOf(ctx); node != 0 {
		// A call a peer forwarded over the cluster transport, for the caller it
		// authenticated (forward.go); one naming nobody is checked as any other.
		if v := h.Get(principalHeader); v != "" {
			name, err := url.PathUnescape(v)
			if err != nil || name == "" {
				a.auth.Fail(Protocol, auth.ReasonMalformed, auth.Anonymous, peer, procedure)
				return auth.Anonymous, unauthenticated("node " + strconv.Itoa(int(node)) + " named no principal it forwarded a call for")
			}
			return auth.Principal(name), nil
		}
	}
	if v := h.Get("Authorization"); v != "" {
		scheme, tok, _ := strings.Cut(v, " ")
		tok = strings.TrimSpace(tok)
		if !strings.EqualFold(scheme, "Bearer") || tok == "" {
			a.auth.Fail(Protocol, auth.ReasonMalformed, auth.Anonymous, peer, procedure)
			return auth.Anonymous, unauthenticated("the Authorization header must be \"Bearer <token>\"")
		}
		p, ok := a.auth.Token(tok)
		if !ok {
			a.auth.Fail(Protocol, auth.ReasonBadCredentials, auth.Anonymous, peer, procedure)
			if by, err := strconv.Atoi(h.Get(forwardedHeader)); err == nil && by > 0 {
				// The node the client called took the token: the users files differ.
				return auth.Anonymous, unauthenticated("the bearer token is not valid on the node that leads what the call " +
					"is for (node " + strconv.Itoa(int(a.b.NodeID())) + "; forwarded by node " + strconv.Itoa(by) +
					", which took it): every node needs the same --auth-file")
			}
			return auth.Anonymous, unauthenticated("the bearer token is not valid")
		}
		return p, nil
	}
	cs, _ := ctx.Value(tlsKey).(*tls.ConnectionState)
	if p, ok := certPrincipal(cs); ok {
		return p, nil
	}
	a.auth.Fail(Protocol, auth.ReasonNoCredentials, auth.Anonymous, peer, procedure)
	return auth.Anonymous, unauthenticated("credentials required: send Authorization: Bearer <token> or a client certificate")
}

func unauthenticated(msg string) error {
	err := apiError(connect.CodeUnauthenticated, ReasonUnauthenticated, errors.New(msg), nil)
	err.Meta().Set("WWW-Authenticate", `Bearer realm="sluice"`)
	return err
}

// authorize checks msg's needs for p.
func (a *API) authorize(p auth.Principal, msg any, peer, procedure string) error {
	if !a.auth.Enabled() {
		return nil
	}
	needs, pol := requirements(msg)
	if pol == unknown {
		a.log.Error("no access rule for this call; refused", "procedure", procedure)
		return a.denied(p, peer, need{auth.All, auth.Resource{Kind: auth.Cluster}})
	}
	for _, n := range needs {
		if !a.auth.Allowed(p, n.op, n.res) {
			return a.denied(p, peer, n)
		}
	}
	return nil
}

// allowed is authorize for a handler that found its resource itself
// (policy lookedUp).
func (a *API) allowed(ctx context.Context, op auth.Operation, res auth.Resource) error {
	c, _ := ctx.Value(callerKey).(caller)
	if a.auth.Allowed(c.p, op, res) {
		return nil
	}
	return a.denied(c.p, c.peer, need{op, res})
}

// visible reports whether the caller may see res in a listing.
func (a *API) visible(ctx context.Context, res auth.Resource) bool {
	return a.auth.Allowed(principalOf(ctx), auth.Describe, res)
}

func (a *API) denied(p auth.Principal, peer string, n need) error {
	a.auth.Fail(Protocol, auth.ReasonDenied, p, peer, n.String())
	return apiError(connect.CodePermissionDenied, ReasonPermissionDenied,
		fmt.Errorf("%s may not %s", p, n), map[string]string{"operation": string(n.op), "resource": n.res.String()})
}

// authInterceptor authenticates and authorizes every call. A server
// stream's one request is checked as it is read, before the handler sees
// it.
type authInterceptor struct{ a *API }

func (i authInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		proc, peer := req.Spec().Procedure, req.Peer().Addr
		p, err := i.a.authenticate(ctx, req.Header(), peer, proc)
		if err != nil {
			return nil, err
		}
		if err := i.a.authorize(p, req.Any(), peer, proc); err != nil {
			return nil, i.a.vouchedDenial(ctx, err)
		}
		return next(context.WithValue(ctx, callerKey, caller{p, peer}), req)
	}
}

func (i authInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i authInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		proc, peer := conn.Spec().Procedure, conn.Peer().Addr
		p, err := i.a.authenticate(ctx, conn.RequestHeader(), peer, proc)
		if err != nil {
			return err
		}
		return next(context.WithValue(ctx, callerKey, caller{p, peer}), &authorizingConn{conn, i.a, p, ctx})
	}
}

// authorizingConn checks each request message a stream receives.
type authorizingConn struct {
	connect.StreamingHandlerConn
	a   *API
	p   auth.Principal
	ctx context.Context // the call's, for vouchedDenial
}

func (c *authorizingConn) Receive(msg any) error {
	if err := c.StreamingHandlerConn.Receive(msg); err != nil {
		return err
	}
	return c.a.vouchedDenial(c.ctx, c.a.authorize(c.p, msg, c.Peer().Addr, c.Spec().Procedure))
}

// vouchedDenial is err, a refusal of a call a peer forwarded for a principal it had
// authorized (forward.go), saying so: the two nodes' users files differ, which "alice may
// not produce" alone does not tell the operator.
func (a *API) vouchedDenial(ctx context.Context, err error) error {
	var cerr *connect.Error
	node := peerOf(ctx)
	if node == 0 || !errors.As(err, &cerr) || cerr.Code() != connect.CodePermissionDenied {
		return err
	}
	out := connect.NewError(cerr.Code(), fmt.Errorf("%s (allowed by node %d, which forwarded the call; refused by the rules of node %d, "+
		"which leads what it is for: every node needs the same --auth-file)", cerr.Message(), node, a.b.NodeID()))
	for _, d := range cerr.Details() {
		out.AddDetail(d)
	}
	for k, vs := range cerr.Meta() {
		out.Meta()[k] = vs
	}
	return out
}

// GuardHTTP wraps a plain HTTP route (the operator's reports beside the
// API) in the same authentication, and requires op on res: 401 or 403
// otherwise, with a one-line body.
func GuardHTTP(store *auth.Store, op auth.Operation, res auth.Resource, h http.Handler) http.Handler {
	if !store.Enabled() {
		return h
	}
	a := &API{auth: store}
	return withConnState(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.authenticate(r.Context(), r.Header, r.RemoteAddr, r.URL.Path)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
			http.Error(w, connect.CodeUnauthenticated.String()+": "+connectMessage(err), http.StatusUnauthorized)
			return
		}
		if !store.Allowed(p, op, res) {
			store.Fail(Protocol, auth.ReasonDenied, p, r.RemoteAddr, string(op)+" "+res.String())
			http.Error(w, fmt.Sprintf("%s: %s may not %s %s", connect.CodePermissionDenied, p, op, res), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	}))
}

func connectMessage(err error) string {
	var cerr *connect.Error
	if errors.As(err, &cerr) {
		return cerr.Message()
	}
	return err.Error()
}
