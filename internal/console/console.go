// Package console owns sluice's web console: the pages `sluice serve`
// serves at /ui on the HTTP listener (queues, a message browser that
// peeks, dead-letter redrive with a preview, topics and partitions,
// consumer groups with lag, subscriptions), rendered on the server from
// html/template with a little hand-written JavaScript, all embedded in the
// binary (no build step, no CDN). docs/console.md says why.
//
// It reads and changes the broker only through the native API, with the
// public Go client over an in-process transport (transport.go): every call
// is authenticated, authorized, limited and timed as any client's. When
// authentication is on, the browser signs in with a bearer token, kept in
// an HttpOnly, SameSite=Strict cookie and sent as the API's Authorization
// header; the console itself grants nothing. Every form that changes state
// is a POST that must come from the console's own origin.
//
// It must never import the broker, a protocol front-end or the node
// (deps_test.go), hold broker state beyond the last sample of counters it
// turns into rates, or serve anything it did not embed.
package console

import (
	"context"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/sluice-mq/sluice/client"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Prefix is where the console is served.
const Prefix = "/ui"

// tokenCookie holds the bearer token a browser signed in with.
const tokenCookie = "sluice_token"

// Options configure New.
type Options struct {
	// API is the native API's handler (its routes on one mux); the
	// console's calls are served by it in-process.
	API http.Handler
	// AuthRequired: the server runs with --auth-file, so a browser must
	// sign in with a bearer token before any page.
	AuthRequired bool
	Logger       *slog.Logger
	// Now is the clock of rates and ages (tests inject one).
	Now func() time.Time
}

// Console serves the pages. It is safe for concurrent use.
type Console struct {
	opts  Options
	pages map[string]*template.Template
	hc    *http.Client

	mu      sync.Mutex // guards samples
	samples map[string]sample
}

// New returns the console over opts.API.
func New(opts Options) (*Console, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &Console{opts: opts, pages: map[string]*template.Template{}, samples: map[string]sample{},
		hc: &http.Client{Transport: inProcess{opts.API}}}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		base := strings.TrimPrefix(n, "templates/")
		if base == "layout.html" || strings.HasPrefix(base, "_") { // the frame and the partials
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/_*.html", n)
		if err != nil {
			return nil, err
		}
		c.pages[strings.TrimSuffix(base, ".html")] = t
	}
	return c, nil
}

// Route is one pattern and its handler, for the server's mux.
type Route struct {
	Pattern string
	Handler http.Handler
}

// Routes are the console's patterns: everything under /ui, and / redirecting
// there.
func (c *Console) Routes() []Route {
	static, _ := fs.Sub(staticFS, "static")
	mux := http.NewServeMux()
	mux.Handle("GET "+Prefix+"/static/", http.StripPrefix(Prefix+"/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET "+Prefix+"/login", c.loginPage)
	mux.HandleFunc("POST "+Prefix+"/login", c.login)
	mux.HandleFunc("POST "+Prefix+"/logout", c.logout)
	page := func(pattern string, fn pageFunc) { mux.Handle(pattern, c.page(fn)) }
	page("GET "+Prefix+"/{$}", c.overview)
	page("GET "+Prefix+"/queues", c.queues)
	page("POST "+Prefix+"/queues", c.createQueue)
	page("GET "+Prefix+"/queues/{name}", c.queue)
	page("POST "+Prefix+"/queues/{name}/settings", c.updateQueue)
	page("POST "+Prefix+"/queues/{name}/purge", c.purgeQueue)
	page("POST "+Prefix+"/queues/{name}/delete", c.deleteQueue)
	page("POST "+Prefix+"/queues/{name}/preview", c.previewRedrive)
	page("POST "+Prefix+"/queues/{name}/redrive", c.startRedrive)
	page("GET "+Prefix+"/redrives/{id}", c.redrive)
	page("GET "+Prefix+"/topics", c.topics)
	page("POST "+Prefix+"/topics", c.createTopic)
	page("GET "+Prefix+"/topics/{name}", c.topic)
	page("POST "+Prefix+"/topics/{name}/delete", c.deleteTopic)
	page("GET "+Prefix+"/topics/{name}/{partition}", c.partition)
	page("GET "+Prefix+"/groups", c.groups)
	page("GET "+Prefix+"/groups/{name}", c.group)
	page("GET "+Prefix+"/subscriptions", c.subscriptions)
	page("GET "+Prefix+"/cluster", c.cluster)
	page("GET "+Prefix+"/users", c.users)
	mux.Handle("GET "+Prefix+"/api/redrives/{id}", c.api(c.redriveJSON))
	h := securityHeaders(mux)
	return []Route{
		{Prefix + "/", h},
		{"GET /{$}", http.RedirectHandler(Prefix+"/", http.StatusFound)},
	}
}

// securityHeaders: the pages load only what they embed, are never framed
// (a redrive button under someone else's page), and are not cached.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "same-origin")
		hd.Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

// pageFunc renders one page: the template's name and its data, or an error.
type pageFunc func(ctx context.Context, r *http.Request, api *client.Client) (string, any, error)

// view is what every template gets.
type view struct {
	Title   string
	Nav     string
	Auth    bool // signed in with a token (show "sign out")
	Data    any
	Error   string
	Flash   string
	Request *http.Request
}

// page wraps a pageFunc: the same-origin check on POSTs, the API client with
// the browser's token, and errors rendered in the page (an unauthenticated
// API answer sends the browser to sign in).
func (c *Console) page(fn pageFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && !sameOrigin(r) {
			http.Error(w, "cross-origin form refused", http.StatusForbidden)
			return
		}
		api, signedIn, ok := c.client(w, r)
		if !ok {
			return
		}
		ctx, cancel := context.WithTimeout(withPeer(r.Context(), r.RemoteAddr), 10*time.Second)
		defer cancel()
		name, data, err := fn(ctx, r, api)
		if redirect, ok := err.(redirectTo); ok {
			http.Redirect(w, r, string(redirect), http.StatusSeeOther)
			return
		}
		v := view{Nav: navOf(r.URL.Path), Auth: signedIn, Data: data, Request: r, Flash: noticeOf(r)}
		status := http.StatusOK
		if err != nil {
			code := codeOf(err)
			if code == connect.CodeUnauthenticated && c.opts.AuthRequired {
				http.Redirect(w, r, Prefix+"/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			status, v.Error, name = httpStatus(code), errorText(err), "error"
		}
		c.render(w, status, name, v)
	})
}

// redirectTo, returned as a page's error, answers 303 See Other there (after
// a POST that worked).
type redirectTo string

func (r redirectTo) Error() string { return "redirect to " + string(r) }

// client is the API client for r: with the browser's token when it signed
// in. Without a token where one is required it sends the browser to sign in
// and returns ok false.
func (c *Console) client(w http.ResponseWriter, r *http.Request) (api *client.Client, signedIn, ok bool) {
	opts := []client.Option{client.WithHTTPClient(c.hc)}
	if ck, err := r.Cookie(tokenCookie); err == nil && ck.Value != "" {
		opts, signedIn = append(opts, client.WithToken(ck.Value)), true
	} else if c.opts.AuthRequired {
		http.Redirect(w, r, Prefix+"/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return nil, false, false
	}
	return client.New("http://console.internal", opts...), signedIn, true
}

// sameOrigin: a state-changing POST came from a page of this console, as
// the browser says (Sec-Fetch-Site, or Origin against Host). Without it a
// page elsewhere could post a redrive to a console on loopback.
//
// It takes the Host header to name this console, which alone it cannot
// know: a page whose own name was rebound to 127.0.0.1 is same-origin to
// the browser. On a loopback listener without authentication the server
// refuses any Host but loopback, localhost and the advertised address
// before the console sees the request (internal/server, hostguard.go);
// with authentication such a page has no token cookie to send.
func sameOrigin(r *http.Request) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" {
		return s == "same-origin"
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return false
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

func httpStatus(code connect.Code) int {
	switch code {
	case connect.CodeNotFound:
		return http.StatusNotFound
	case connect.CodeInvalidArgument, connect.CodeFailedPrecondition, connect.CodeAlreadyExists:
		return http.StatusBadRequest
	case connect.CodePermissionDenied:
		return http.StatusForbidden
	case connect.CodeUnauthenticated:
		return http.StatusUnauthorized
	case connect.CodeResourceExhausted:
		return http.StatusTooManyRequests
	case connect.CodeUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// codeOf is an API error's Connect code.
func codeOf(err error) connect.Code {
	var ce *client.Error
	if errors.As(err, &ce) {
		return ce.Code
	}
	return connect.CodeOf(err)
}

// errorText is what a page shows of an API error: its message and reason.
func errorText(err error) string {
	var ce *client.Error
	if errors.As(err, &ce) {
		return ce.Message + " (" + ce.Reason + ")"
	}
	return err.Error()
}

func (c *Console) render(w http.ResponseWriter, status int, name string, v view) {
	t := c.pages[name]
	if t == nil {
		http.Error(w, "no page "+name, http.StatusInternalServerError)
		return
	}
	if v.Title == "" {
		v.Title = name
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := t.Execute(w, v); err != nil {
		c.opts.Logger.Warn("console: rendering a page", "page", name, "err", err)
	}
}

func navOf(path string) string {
	rest := strings.TrimPrefix(path, Prefix+"/")
	first, _, _ := strings.Cut(rest, "/")
	switch first {
	case "queues", "redrives":
		return "queues"
	case "topics", "groups", "subscriptions", "cluster", "users":
		return first
	}
	return "overview"
}
