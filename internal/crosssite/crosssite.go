// Package crosssite tells a request a browser sent on behalf of a page of another site
// (cross-site request forgery) from one a client sent itself.
//
// A browser sends a form POST, or a fetch without custom headers, for any page to any
// address — a broker on the operator's own machine included — without asking the server
// first (a CORS "simple" request). It cannot be stopped from sending, but it says who
// asks: Sec-Fetch-Site (every current browser) and Origin (on every POST). The clients
// sluice serves — the SDKs, the AWS CLI, our CLI and Go client — send neither, and a URL
// typed or pasted into the address bar is Sec-Fetch-Site: none without an Origin.
//
// It owns that judgment only: each front-end decides what to refuse with it and answers
// in its own protocol's terms. It must never read a body or keep state.
package crosssite

import (
	"net/http"
	"net/url"
	"strings"
)

// Why says why r, as a browser labelled it, was sent by a page of another site than the
// one it is addressed to, or "" if it was not: Sec-Fetch-Site cross-site or same-site
// (another port of localhost is same-site), or an Origin whose host:port is not the
// request's Host ("null" included: a sandboxed frame, a file, a redirect).
func Why(r *http.Request) string {
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "cross-site", "same-site":
		return "the browser sent Sec-Fetch-Site: " + site
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	if u, err := url.Parse(origin); err != nil || !strings.EqualFold(u.Host, r.Host) {
		return "the browser sent Origin: " + origin + ", another origin than this endpoint's, " + r.Host
	}
	return ""
}
