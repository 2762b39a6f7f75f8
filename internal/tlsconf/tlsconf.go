// Package tlsconf owns sluice's server-side TLS (docs/security.md, "TLS"):
// it loads the certificate and key named by --tls-cert and --tls-key, and
// the optional client CA of --tls-client-ca, into the *tls.Config every
// TLS listener serves; it reloads them, without a restart, on SIGHUP and
// when the files change; and it names the principal of a verified client
// certificate (Principal), for the front-ends' authentication. The same
// reloader, over a cluster's node certificate and CA, gives both halves of
// the mutual TLS between nodes (peer.go).
//
// A listener's config picks the current certificate at each handshake
// (GetConfigForClient), so a reload reaches new connections at once and
// leaves open ones as they are. A new file that does not load keeps the
// old certificate serving; the failure is logged and reported through
// Options.OnReload (the sluice_tls_reloads_total metric).
//
// It must never listen, know a protocol, or decide what a principal may
// do: the server wraps its listeners with these configs, the front-ends
// map a principal to their own authentication, and internal/auth decides.
package tlsconf

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Options name the files and where reloads are reported.
type Options struct {
	CertFile string // PEM certificate chain, leaf first (--tls-cert)
	KeyFile  string // PEM private key of the leaf (--tls-key)
	// ClientCAFile, when set, is a PEM bundle of the CAs a client
	// certificate must chain to (--tls-client-ca). Clients may still
	// connect without one (tls.VerifyClientCertIfGiven), so a listener
	// serves certificate and password clients alike; one that presents a
	// certificate that does not chain is refused in the handshake.
	ClientCAFile string
	Logger       *slog.Logger // default slog.Default()
	// OnReload, when set, is told the outcome of each reload that found
	// changed files (err nil: the new certificate serves) and of each
	// SIGHUP. leaf is the certificate now serving either way.
	OnReload func(leaf *x509.Certificate, err error)
	// Now is the clock a failed change's settle time is measured on (time.Now).
	Now func() time.Time
	// Flags name the three files in errors: the flags that set them (default
	// "--tls-cert", "--tls-key", "--tls-client-ca").
	Flags [3]string
}

// material is one loaded set of files; it is never changed once stored.
type material struct {
	cert      tls.Certificate
	clientCAs *x509.CertPool // nil: no client certificates asked for
	sum       [sha256.Size]byte
}

// Reloader serves the current certificate to every config it made.
type Reloader struct {
	opts Options
	log  *slog.Logger
	cur  atomic.Pointer[material]

	mu sync.Mutex // serialises loads, and guards the failure state below
	// failSum is the content that last failed to load while polling, and
	// failReported whether that failure was logged: a poll that finds the
	// cert written but not yet the key waits one more poll before it
	// reports, and a broken file is reported once, not every poll.
	failSum      [sha256.Size]byte
	failReported bool
	failSeen     time.Time // when failSum was first seen
}

// failSettle is how long a change that does not load must stay unchanged before a poll
// reports it: a pair replaced file by file is half written for milliseconds, and with a
// short poll interval on a loaded machine two polls can fall inside that window.
const failSettle = time.Second

// New loads the files once; it fails if they do not load, so a server
// with a bad certificate does not start.
func New(opts Options) (*Reloader, error) {
	if opts.CertFile == "" || opts.KeyFile == "" {
		return nil, errors.New("tls: both a certificate and a key file are needed")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.OnReload == nil {
		opts.OnReload = func(*x509.Certificate, error) {}
	}
	for i, d := range [3]string{"--tls-cert", "--tls-key", "--tls-client-ca"} {
		if opts.Flags[i] == "" {
			opts.Flags[i] = d
		}
	}
	r := &Reloader{opts: opts, log: opts.Logger}
	raw, err := r.read()
	if err != nil {
		return nil, err
	}
	m, err := parse(raw, opts.Flags)
	if err != nil {
		return nil, err
	}
	r.cur.Store(m)
	r.logServed("tls certificate loaded", m.cert.Leaf)
	return r, nil
}

// Leaf is the certificate being served now.
func (r *Reloader) Leaf() *x509.Certificate { return r.cur.Load().cert.Leaf }

// ServerConfig returns a config for one listener: TLS 1.2 at least, Go's
// defaults otherwise, offering nextProtos in ALPN ("h2", "http/1.1" for an
// HTTP listener; none for Kafka). Each handshake gets the certificate (and
// client CAs) current at that moment.
func (r *Reloader) ServerConfig(nextProtos ...string) *tls.Config {
	var derived atomic.Pointer[derivedConfig]
	get := func(*tls.ClientHelloInfo) (*tls.Config, error) {
		m := r.cur.Load()
		if d := derived.Load(); d != nil && d.from == m {
			return d.cfg, nil
		}
		d := &derivedConfig{from: m, cfg: m.config(nextProtos)}
		derived.Store(d) // two handshakes racing here build the same thing
		return d.cfg, nil
	}
	base := r.cur.Load().config(nextProtos)
	base.GetConfigForClient = get
	return base
}

// derivedConfig caches the config built from one material, so a handshake
// does not build one.
type derivedConfig struct {
	from *material
	cfg  *tls.Config
}

func (m *material) config(nextProtos []string) *tls.Config {
	c := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{m.cert},
		NextProtos:   append([]string(nil), nextProtos...),
	}
	if m.clientCAs != nil {
		c.ClientAuth = tls.VerifyClientCertIfGiven
		c.ClientCAs = m.clientCAs
	}
	return c
}

// files are the raw bytes of one read of the configured files.
type files struct{ cert, key, ca []byte }

func (f files) sum() [sha256.Size]byte {
	h := sha256.New()
	for _, b := range [][]byte{f.cert, f.key, f.ca} {
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
	}
	var s [sha256.Size]byte
	h.Sum(s[:0])
	return s
}

func (r *Reloader) read() (files, error) {
	var f files
	var err error
	if f.cert, err = os.ReadFile(r.opts.CertFile); err != nil {
		return f, fmt.Errorf("%s: %w", r.opts.Flags[0], err)
	}
	if f.key, err = os.ReadFile(r.opts.KeyFile); err != nil {
		return f, fmt.Errorf("%s: %w", r.opts.Flags[1], err)
	}
	if r.opts.ClientCAFile != "" {
		if f.ca, err = os.ReadFile(r.opts.ClientCAFile); err != nil {
			return f, fmt.Errorf("%s: %w", r.opts.Flags[2], err)
		}
	}
	return f, nil
}

// parse turns the files' bytes into material, or says which file is wrong.
func parse(f files, flags [3]string) (*material, error) {
	cert, err := tls.X509KeyPair(f.cert, f.key)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", flags[0], flags[1], err)
	}
	// X509KeyPair fills Leaf since Go 1.23; parse it anyway if not.
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("%s: %w", flags[0], err)
		}
	}
	m := &material{cert: cert, sum: f.sum()}
	if f.ca != nil {
		m.clientCAs = x509.NewCertPool()
		if !m.clientCAs.AppendCertsFromPEM(f.ca) {
			return nil, errors.New(flags[2] + ": no PEM certificate in the file")
		}
	}
	return m, nil
}

// Reload loads the files now (what SIGHUP does). On failure the old
// certificate keeps serving, and the error is logged, reported and
// returned (once: polls that find the same files say nothing more).
func (r *Reloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	raw, sum, err := r.readSum()
	if err == nil {
		var m *material
		if m, err = parse(raw, r.opts.Flags); err == nil {
			r.failSum, r.failReported = [sha256.Size]byte{}, false
			r.swap(m)
			return nil
		}
	}
	r.failSum, r.failReported = sum, true
	r.reportFailure(err)
	return err
}

// readSum reads the files and sums what it read; a read error is part of
// the sum, so the same missing file twice in a row is one state.
func (r *Reloader) readSum() (files, [sha256.Size]byte, error) {
	raw, err := r.read()
	sum := raw.sum()
	if err != nil {
		sum = sha256.Sum256(append(sum[:], err.Error()...))
	}
	return raw, sum, err
}

// Poll reloads if the files changed since the certificate serving now was
// loaded. A change that does not load is reported only if it is still
// there, unchanged, failSettle later: files are rarely replaced in one
// step (the certificate, then the key), and a half-written pair must not
// count as a failure.
func (r *Reloader) Poll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	raw, sum, err := r.readSum()
	if err == nil && sum == r.cur.Load().sum {
		if r.failReported { // the files are back to what is served: say the failure is over
			r.log.Info("tls certificate files load again; the certificate served is unchanged", certAttrs(r.cur.Load().cert.Leaf)...)
			r.opts.OnReload(r.cur.Load().cert.Leaf, nil)
		}
		r.failSum, r.failReported = [sha256.Size]byte{}, false
		return
	}
	if sum == r.failSum && r.failReported {
		return // already said; nothing changed since
	}
	if err == nil {
		var m *material
		if m, err = parse(raw, r.opts.Flags); err == nil {
			r.failSum, r.failReported = [sha256.Size]byte{}, false
			r.swap(m)
			return
		}
	}
	if sum != r.failSum {
		r.failSum, r.failReported, r.failSeen = sum, false, r.opts.Now() // first sight: wait
		return
	}
	if r.opts.Now().Sub(r.failSeen) < failSettle {
		return
	}
	r.failReported = true
	r.reportFailure(err)
}

// swap makes m serve. Called with mu held.
func (r *Reloader) swap(m *material) {
	old := r.cur.Swap(m)
	if old.sum != m.sum {
		r.logServed("tls certificate reloaded", m.cert.Leaf)
	}
	r.opts.OnReload(m.cert.Leaf, nil)
}

func (r *Reloader) reportFailure(err error) {
	leaf := r.cur.Load().cert.Leaf
	r.log.Error("tls certificate reload failed; the previous certificate is still served",
		append([]any{"err", err}, certAttrs(leaf)...)...)
	r.opts.OnReload(leaf, err)
}

// logServed logs the certificate now served: a warning if it is outside its validity
// (expired, or not yet valid), which every client will refuse — it loads all the same,
// as a replacement may be on its way, but the operator must not learn it from clients.
func (r *Reloader) logServed(msg string, leaf *x509.Certificate) {
	now := r.opts.Now()
	switch {
	case now.After(leaf.NotAfter):
		r.log.Warn(msg+", but it has expired: clients will refuse every handshake", certAttrs(leaf)...)
	case now.Before(leaf.NotBefore):
		r.log.Warn(msg+", but it is not valid yet: clients will refuse every handshake",
			append(certAttrs(leaf), "not_before", leaf.NotBefore.UTC().Format(time.RFC3339))...)
	default:
		r.log.Info(msg, certAttrs(leaf)...)
	}
}

func certAttrs(c *x509.Certificate) []any {
	return []any{"subject", c.Subject.String(), "serial", c.SerialNumber.String(),
		"not_after", c.NotAfter.UTC().Format(time.RFC3339)}
}
