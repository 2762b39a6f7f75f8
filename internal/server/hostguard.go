package server

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/internal/lograte"
)

// DNS rebinding (docs/security.md, "Safe defaults"). Without --auth-file a listener
// binds loopback, so only this machine reaches it; but a web page the operator opens
// can reach it too, through a name of the attacker's own that first resolves to the
// attacker's server and then to 127.0.0.1: the browser takes the answers for the
// attacker's site, sends whatever that page asks (the console's forms pass its
// same-origin check, since Origin and Host both name the attacker's site) and lets the
// page read the answers. The one thing such a request cannot hide is the name in its
// Host header. So a listener that serves without authentication on loopback answers
// only requests addressed to a loopback address, to localhost, or to the name it was
// told it is reached by (--<listener>-advertised-addr); anything else is 421.
//
// Every HTTP listener is served through newHTTPServer, which applies this: the native
// API with the console and the admin endpoints, health and metrics on whichever
// listener has them, and the SQS front-end (HTTPFrontend). No path is exempt, health
// and /metrics included: a rebound page reads what it is answered, /metrics names
// every queue and topic, and one rule for the whole listener leaves nothing to reason
// about path by path. A probe on the same machine connects by 127.0.0.1 or localhost.
//
// With --auth-file the request must carry credentials a page cannot have (the
// console's cookie is SameSite=Strict, a SigV4 signature or bearer token is not sent
// by a browser on its own), and a listener beyond loopback is reached under whatever
// names its network gives it (sluice:9324 between containers): both are left as they
// were.

// guardHost wraps h, the handler of listener name, in the Host check above when that
// listener needs it, and returns h unchanged otherwise.
func (s *Server) guardHost(name string, h http.Handler) http.Handler {
	addr := s.cfg.listenAddr(name)
	if s.cfg.AuthFile != "" || addr == "" || !IsLoopback(addr) {
		return h
	}
	advertised := hostOnly(s.cfg.advertised(name))
	hint := "--" + name + "-advertised-addr"
	if name == Metrics {
		hint = "" // it has no advertised address: nothing else to set
	}
	logged := &lograte.Limiter{Every: refusalLogEvery}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hostAllowed(r.Host, advertised) {
			h.ServeHTTP(w, r)
			return
		}
		// Said in the log, for the operator whose proxy passes its own Host; at most a
		// line every refusalLogEvery (listener.go's), so a page that keeps trying does
		// not fill the log.
		if ok, held := logged.Allow(time.Now()); ok {
			s.log.Warn("refused a request addressed to a name this listener does not answer to "+
				"(DNS rebinding from a web page, or a proxy that passes its own Host)",
				"listener", name, "host", r.Host, "peer", r.RemoteAddr, "suppressed", held)
		}
		// Answered before the body guard (body.go) bounds the body's time, so the body
		// must not be read at all: net/http drains what is left of it after the handler,
		// with no deadline (a slow body would hold the connection), and would parse what
		// follows as the next request. A read deadline already passed ends the drain at
		// once, and the connection closes after the answer.
		closeAfter(w, r)
		_ = http.NewResponseController(w).SetReadDeadline(time.Now())
		http.Error(w, misdirected(name, r.Host, hint), http.StatusMisdirectedRequest)
	})
}

// misdirected is the one-line answer to a refused Host: what was refused, why, and
// what to do instead.
func misdirected(name, host, hint string) string {
	fix := "connect by 127.0.0.1, [::1] or localhost"
	if hint != "" {
		fix += ", or set " + hint + " to the name you connect by"
	}
	return fmt.Sprintf("misdirected request: Host %q is not a name of this listener; the %s listener runs "+
		"without --auth-file on loopback, so it answers only requests addressed to a loopback address or "+
		"localhost (a web page could otherwise reach it through a DNS name of its own); %s", host, name, fix)
}

// hostAllowed reports whether a Host header names this machine's loopback or the
// listener's advertised host (advertised, as hostOnly gives it): an IP literal in
// 127.0.0.0/8 or ::1, localhost or a name under .localhost (RFC 6761: they never
// resolve elsewhere, and browsers answer them themselves), or advertised. Names
// compare without case and without a final dot.
//
// An empty Host is allowed: a browser always sends the host of the URL it loads, so
// a request without one (HTTP/1.0 allows that) is no browser's.
func hostAllowed(hostport, advertised string) bool {
	host := hostOnly(hostport)
	if host == "" {
		return true
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback() || ip.Equal(net.ParseIP(advertised))
	}
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	return advertised != "" && strings.EqualFold(host, advertised)
}

// hostOnly is the host of a Host header or address, with its port, the brackets of
// an IPv6 literal and a final dot removed.
func hostOnly(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1] // [::1] without a port
	}
	return strings.TrimSuffix(host, ".")
}
