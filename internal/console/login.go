package console

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/sluice-mq/sluice/client"
)

// Signing in: the browser gives a bearer token (`sluice user token`), the
// console checks it with one API call and keeps it in a cookie only the
// server reads (HttpOnly), sent only by this site's own pages
// (SameSite=Strict), over TLS only when the page came over TLS (Secure),
// and only under /ui. The console never decides what a token may do: each
// page's API calls carry it, and the API refuses what it does not allow.

type loginData struct {
	Next  string
	Error string
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, http.StatusOK, "login", view{Title: "sign in", Data: loginData{Next: safeNext(r.URL.Query().Get("next"))}, Request: r})
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "cross-origin form refused", http.StatusForbidden)
		return
	}
	token := strings.TrimSpace(r.FormValue("token"))
	next := safeNext(r.FormValue("next"))
	ctx, cancel := context.WithTimeout(withPeer(r.Context(), r.RemoteAddr), 10*time.Second)
	defer cancel()
	api := client.New("http://console.internal", client.WithHTTPClient(c.hc), client.WithToken(token))
	// Any authenticated principal may list (the list is filtered), so this
	// checks the token and nothing else.
	if _, err := api.ListQueues(ctx, ""); token == "" || err != nil {
		msg := "that token was not accepted"
		if err != nil && codeOf(err) != connect.CodeUnauthenticated { // say what else went wrong
			msg = errorText(err)
		}
		c.render(w, http.StatusUnauthorized, "login", view{Title: "sign in", Data: loginData{Next: next, Error: msg}, Request: r})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: token, Path: Prefix, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "cross-origin form refused", http.StatusForbidden)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: "", Path: Prefix, MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, Prefix+"/login", http.StatusSeeOther)
}

// safeNext keeps a post-login redirect inside the console: never another
// site (an open redirect) and never a scheme-relative "//host".
func safeNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || u.IsAbs() || u.Host != "" || !strings.HasPrefix(u.Path, Prefix+"/") || strings.HasPrefix(next, "//") {
		return Prefix + "/"
	}
	return next
}
