package sqs

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/crosssite"
	"github.com/sluice-mq/sluice/internal/peerhttp"
	"github.com/sluice-mq/sluice/internal/telemetry"
)

// Config shapes the handler. Zero values take the defaults listed.
type Config struct {
	// AdvertisedURL is the scheme and host:port queue URLs name, e.g.
	// "http://127.0.0.1:9324". Empty: taken from each request's Host header,
	// so a client always gets URLs it can reach the way it came.
	AdvertisedURL string
	Region        string       // default us-east-1
	Account       string       // default 000000000000
	Logger        *slog.Logger // default slog.Default()
	// Auth verifies SigV4 signatures and authorizes each action; nil:
	// authentication off, everything allowed.
	Auth *auth.Store
	// MaxRequestBytes bounds a request body. Default 8 MiB: a 1 MiB message
	// percent-encoded in a form can triple in size, and a batch carries ten.
	MaxRequestBytes int64
	// Now is the clock SigV4 signatures are held to (default time.Now;
	// tests inject one).
	Now func() time.Time
	// ObserveRequest, when set, is told how long each request took, with
	// protocol "sqs" and the action's name (SendMessage, …), or "unknown"
	// for a request refused before a served action was read from it, so
	// the label set is fixed whatever clients send: the
	// sluice_request_duration_seconds histogram.
	ObserveRequest func(protocol, operation string, d time.Duration)
	// Tracer records spans and carries trace context (trace.go); nil: off.
	Tracer *telemetry.Tracer
	// DialPeer, in a cluster, opens a byte stream to another node over the cluster
	// transport, on which that node serves SQS to its peers: requests that came over TLS
	// are forwarded that way (forward.go). Nil: over plain HTTP, as the others.
	DialPeer peerhttp.Dial
}

// Defaults of Config.
const (
	DefaultRegion          = "us-east-1"
	DefaultAccount         = "000000000000"
	DefaultMaxRequestBytes = 8 << 20
)

// Handler serves the SQS API over a broker. It is safe for concurrent use.
type Handler struct {
	b        *broker.Broker
	cfg      Config
	log      *slog.Logger
	attempts attempts // FIFO ReceiveRequestAttemptId answers (receive_attempts.go)
	keys     keyCache // SigV4 signing keys of recent requests (auth.go)
	// peerClient forwards over the cluster transport (forward.go); nil without DialPeer.
	peerClient *http.Client
}

// NewHandler returns the SQS front-end for b.
func NewHandler(b *broker.Broker, cfg Config) *Handler {
	if cfg.Region == "" {
		cfg.Region = DefaultRegion
	}
	if cfg.Account == "" {
		cfg.Account = DefaultAccount
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.ObserveRequest == nil {
		cfg.ObserveRequest = func(string, string, time.Duration) {}
	}
	cfg.AdvertisedURL = strings.TrimRight(cfg.AdvertisedURL, "/")
	if cfg.AdvertisedURL != "" && !strings.Contains(cfg.AdvertisedURL, "://") {
		cfg.AdvertisedURL = "http://" + cfg.AdvertisedURL // a bare host:port, as --sqs-advertised-addr takes
	}
	h := &Handler{b: b, cfg: cfg, log: cfg.Logger}
	if cfg.DialPeer != nil {
		h.peerClient = newForwardClient(peerhttp.DialContext(cfg.DialPeer))
	}
	return h
}

// actionFunc runs one decoded action and returns the value to encode (nil
// for actions that answer with metadata only).
type actionFunc func(h *Handler, c *call) (any, error)

// actions is the dispatch table, filled by each action file's init.
var actions = map[string]actionFunc{}

func register(name string, fn actionFunc) { actions[name] = fn }

// input is a request shape: JSON decodes with encoding/json, the query
// protocol through fromQuery.
type input interface {
	fromQuery(f form) error
}

// handle adapts a typed action to the dispatch table.
func handle[I any, P interface {
	*I
	input
}](fn func(h *Handler, c *call, in P) (any, error)) actionFunc {
	return func(h *Handler, c *call) (any, error) {
		in := P(new(I))
		if err := c.decode(in); err != nil {
			return nil, err
		}
		return fn(h, c, in)
	}
}

// call is one request in flight.
type call struct {
	ctx       context.Context
	json      bool
	action    string
	body      []byte // JSON body
	raw       []byte // the request body as it came, for forwarding (forward.go)
	form      form   // query parameters
	pathQueue string // queue name from the URL path, if any
	requestID string
	senderID  string
	baseURL   string         // scheme://host for queue URLs; set by base, on first use
	req       *http.Request  // the request, for base
	principal auth.Principal // who signed the request (authenticate)
	keyID     string         // the access key it was signed with
	peer      string         // the client's address, for the failure log
	tr        *callTrace     // the span being gathered; nil unless traced (trace.go)
}

func (c *call) decode(in input) error {
	if c.json {
		if f, ok := in.(fastDecoder); ok {
			if body := bytes.TrimSpace(c.body); len(body) > 0 && f.decodeFast(body) {
				return nil
			}
		}
		return decodeJSON(c.body, in)
	}
	return in.fromQuery(c.form)
}

// ServeHTTP answers one SQS request in the protocol it came in.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := &call{ctx: r.Context(), requestID: newRequestID(), req: r, peer: r.RemoteAddr}
	c.json = r.Header.Get("X-Amz-Target") != ""
	// Registered first so it runs last: after a panic's answer too.
	start := time.Now()
	defer h.observe(c, start)
	defer func() {
		// No input may crash the process: a panic is a bug, answered as
		// SQS answers its own, and logged with the stack to fix it.
		if p := recover(); p != nil {
			h.log.Error("sqs: panic", "action", c.action, "panic", p, "stack", string(debug.Stack()))
			h.writeError(w, c, newError(errInternal, "internal error"))
		}
	}()
	if err := h.parse(w, r, c); err != nil {
		h.writeError(w, c, err)
		return
	}
	fn := actions[c.action]
	if fn == nil {
		h.writeError(w, c, unknownAction(c.action))
		return
	}
	h.traceStart(r, c, start)
	out, err := fn(h, c)
	if err != nil {
		if h.forward(w, r, c, err) {
			return // the leader traces it: the request keeps its headers
		}
		h.traceEnd(c, err)
		h.writeError(w, c, err)
		return
	}
	h.traceEnd(c, nil)
	h.writeResult(w, c, out)
}

// observe records c in the request duration histogram, under its action
// only if that is one served: an action name is client input.
func (h *Handler) observe(c *call, start time.Time) {
	op := "unknown"
	if _, ok := actions[c.action]; ok {
		op = c.action
	}
	h.cfg.ObserveRequest(protocolName, op, time.Since(start))
}

// parse reads the body within the size limit and finds the action.
func (h *Handler) parse(w http.ResponseWriter, r *http.Request, c *call) error {
	if r.Body == nil { // a server request always has one; a handler called directly may not
		r.Body = http.NoBody
	}
	body, err := readBody(http.MaxBytesReader(w, r.Body, h.cfg.MaxRequestBytes), r.ContentLength, h.cfg.MaxRequestBytes)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return newError(errRequestTooLarge, "request body is larger than %d bytes", h.cfg.MaxRequestBytes)
		}
		return newError(errMalformedQuery, "reading request body: %v", err)
	}
	c.raw = body
	if err := h.authenticate(r, c, body); err != nil {
		return err
	}
	// After authentication, so that a verified signature lets a presigned URL through
	// wherever it was opened from (crosssite.go); before the action is even read.
	if why := crosssite.Why(r); why != "" && c.keyID == "" {
		return refuseCrossSite(why)
	}
	c.senderID = senderID(r, h.cfg.Account)
	if c.keyID != "" {
		c.senderID = c.keyID // verified, and a presigned URL carries it outside the header
	}
	c.pathQueue = queueFromPath(r.URL.EscapedPath())
	if c.json {
		target := r.Header.Get("X-Amz-Target")
		name, ok := strings.CutPrefix(target, "AmazonSQS.")
		if !ok {
			return unknownAction(target)
		}
		c.action, c.body = name, body
		return nil
	}
	f, err := parseForm(r, body)
	if err != nil {
		return err
	}
	c.form = f
	c.action = f.str("Action")
	if c.action == "" {
		return newError(errMissingAction, "The request must contain the parameter Action.")
	}
	if id := f.str("AWSAccessKeyId"); id != "" && c.senderID == h.cfg.Account && c.keyID == "" {
		c.senderID = id
	}
	return nil
}

// readBody reads a request body to its end. With the length announced
// (Content-Length, within max) it reads into one buffer of that size, where
// io.ReadAll would grow one from 512 bytes (five allocations and copies for
// a 1 KiB SendMessage). The length is only a hint: a body that runs past it
// still grows the buffer, and the limit stays r's (MaxBytesReader).
func readBody(r io.Reader, length, max int64) ([]byte, error) {
	if length <= 0 || length > max {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, length+1) // +1: room to see the end without growing
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// base is the scheme and host c's queue URLs carry. Worked out when an
// answer names a queue URL (CreateQueue, GetQueueUrl, ListQueues, a
// forward), not for every request: building it was a string a request
// that a SendMessage never used.
func (h *Handler) base(c *call) string {
	if c.baseURL == "" && c.req != nil {
		c.baseURL = h.baseURL(c.req)
	}
	return c.baseURL
}

// baseURL is the scheme and host queue URLs carry.
func (h *Handler) baseURL(r *http.Request) string {
	if base := forwardedBase(r); base != "" {
		return base // forwarded by the node the client used (forward.go)
	}
	if h.cfg.AdvertisedURL != "" {
		return h.cfg.AdvertisedURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// senderID is the access key id of a SigV4 Authorization header: the SDKs'
// credentials are what SQS reports as SenderId (an IAM identity there).
// Without one it is the account.
func senderID(r *http.Request, account string) string {
	auth := r.Header.Get("Authorization")
	_, cred, ok := strings.Cut(auth, "Credential=")
	if !ok {
		return account
	}
	id, _, _ := strings.Cut(cred, "/")
	if id == "" || len(id) > 128 {
		return account
	}
	return id
}

// newRequestID returns a random UUID, the form SQS request ids take.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails on Linux
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte // 8-4-4-4-12 hex digits, built in place: fmt cost five allocations a request
	hex.Encode(s[0:8], b[0:4])
	hex.Encode(s[9:13], b[4:6])
	hex.Encode(s[14:18], b[6:8])
	hex.Encode(s[19:23], b[8:10])
	hex.Encode(s[24:], b[10:])
	s[8], s[13], s[18], s[23] = '-', '-', '-', '-'
	return string(s[:])
}
