// Package client is the Go client of sluice's native API: queues, dead
// letters and redrive, topics and subscriptions, consumer groups, and a
// Worker that runs handlers over a queue.
//
// Every call takes a context; errors carry the server's machine-readable
// reason and match the sentinels of errors.go with errors.Is:
//
//	c := client.New("http://127.0.0.1:8080")
//	if _, err := c.Send(ctx, "emails", []byte("hello")); errors.Is(err, client.ErrQueueNotFound) { … }
//
// For throughput, a Publisher (TopicPublisher, QueuePublisher) batches
// concurrent publishes over one StreamService.Publish stream and gives each
// a future that answers once the entry is durable; ConsumeAcked is Consume
// with acks on the stream. Both need HTTP/2 and open it themselves (h2c
// for http:// URLs; WithStreamHTTPClient to supply the client). The unary
// calls stay for everything else, and for exactly-once produce.
//
// A server with --auth-file wants a credential: WithToken sends a bearer
// token, WithTLS a client certificate (docs/security.md); a refused call
// matches ErrUnauthenticated or ErrPermissionDenied.
//
// Messages and configs are the schema's types (package sluicev1), aliased
// here so one import suffices. This package owns the public Go contract; it
// must never import sluice's internal packages, so programs outside the
// module can use it unchanged.
package client

import (
	"context"
	"crypto/tls"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/sluice-mq/sluice/proto/sluice/v1/sluicev1connect"
)

// Client calls one sluice server. It is safe for concurrent use.
type Client struct {
	queue sluicev1connect.QueueServiceClient
	dlq   sluicev1connect.DeadLetterServiceClient
	topic sluicev1connect.TopicServiceClient
	group sluicev1connect.GroupServiceClient
	// stream is StreamService over HTTP/2, which bidirectional streams need.
	stream sluicev1connect.StreamServiceClient
}

// Protocol is the wire protocol the client speaks.
type Protocol int

const (
	// ProtocolConnect is Connect with binary protobuf over HTTP/1.1 (the default).
	ProtocolConnect Protocol = iota
	// ProtocolConnectJSON is Connect with JSON bodies, as curl would send.
	ProtocolConnectJSON
	// ProtocolGRPC is gRPC over HTTP/2 (cleartext h2c for http:// URLs).
	ProtocolGRPC
	// ProtocolGRPCWeb is gRPC-Web, the protocol browsers use.
	ProtocolGRPCWeb
)

type config struct {
	http     *http.Client
	h2       *http.Client // for StreamService; nil: an HTTP/2 client of New's making
	protocol Protocol
	extra    []connect.ClientOption
	token    string
	tls      *tls.Config
	// notLeaderRetry: how long NOT_LEADER answers are retried (retry.go); nil: the default.
	notLeaderRetry *time.Duration
}

// Option configures New.
type Option func(*config)

// WithHTTPClient sends requests through hc (timeouts, TLS, proxies). With
// ProtocolGRPC it must speak HTTP/2.
func WithHTTPClient(hc *http.Client) Option { return func(c *config) { c.http = hc } }

// WithStreamHTTPClient sends the bidirectional streams (Publisher,
// ConsumeAcked) through hc, which must speak HTTP/2: h2c for http:// URLs.
// Without it they use an HTTP/2 client of their own (with WithTLS's
// configuration), whatever WithHTTPClient says, as HTTP/1.1 cannot carry
// them.
func WithStreamHTTPClient(hc *http.Client) Option { return func(c *config) { c.h2 = hc } }

// WithProtocol picks the wire protocol; the default is ProtocolConnect.
func WithProtocol(p Protocol) Option { return func(c *config) { c.protocol = p } }

// WithConnectOptions passes options to the underlying Connect clients
// (interceptors, compression).
func WithConnectOptions(opts ...connect.ClientOption) Option {
	return func(c *config) { c.extra = append(c.extra, opts...) }
}

// WithToken sends token on every call as "Authorization: Bearer <token>",
// the native API's credential (`sluice user add --token` makes one). Use
// it over https:// unless the network is trusted: a bearer token is a
// password.
func WithToken(token string) Option { return func(c *config) { c.token = token } }

// WithTLS sets the TLS configuration of the default HTTP client: RootCAs
// to trust a private CA, Certificates to present a client certificate
// (mutual TLS, whose Common Name the server takes as the principal). With
// WithHTTPClient, configure TLS in that client instead; WithTLS is then
// ignored.
func WithTLS(cfg *tls.Config) Option { return func(c *config) { c.tls = cfg } }

// New returns a client of the server at baseURL, e.g. "http://127.0.0.1:8080".
// It does not connect until the first call.
func New(baseURL string, opts ...Option) *Client {
	cfg := config{}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.http == nil {
		cfg.http = defaultHTTPClient(cfg.protocol, cfg.tls)
	}
	retry := DefaultNotLeaderRetry
	if cfg.notLeaderRetry != nil {
		retry = *cfg.notLeaderRetry
	}
	copts := []connect.ClientOption{connect.WithInterceptors(notLeaderRetry(retry))}
	switch cfg.protocol {
	case ProtocolConnectJSON:
		copts = append(copts, connect.WithProtoJSON())
	case ProtocolGRPC:
		copts = append(copts, connect.WithGRPC())
	case ProtocolGRPCWeb:
		copts = append(copts, connect.WithGRPCWeb())
	}
	if cfg.token != "" {
		copts = append(copts, connect.WithInterceptors(bearer("Bearer "+cfg.token)))
	}
	copts = append(copts, cfg.extra...)
	base := strings.TrimRight(baseURL, "/")
	if cfg.h2 == nil {
		cfg.h2 = defaultHTTPClient(ProtocolGRPC, cfg.tls) // HTTP/2 only, h2c for http://
	}
	sopts := copts[1:] // not the NOT_LEADER retry of unary calls: a stream answers NOT_LEADER per entry
	return &Client{
		queue:  sluicev1connect.NewQueueServiceClient(cfg.http, base, copts...),
		dlq:    sluicev1connect.NewDeadLetterServiceClient(cfg.http, base, copts...),
		topic:  sluicev1connect.NewTopicServiceClient(cfg.http, base, copts...),
		group:  sluicev1connect.NewGroupServiceClient(cfg.http, base, copts...),
		stream: sluicev1connect.NewStreamServiceClient(cfg.h2, base, sopts...),
	}
}

// defaultHTTPClient has no overall timeout: long polls and streams hold a
// response open, and each call's context bounds it instead. gRPC needs
// HTTP/2, cleartext for http:// URLs.
func defaultHTTPClient(p Protocol, tc *tls.Config) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if tc != nil {
		t.TLSClientConfig = tc.Clone()
	}
	if p == ProtocolGRPC {
		// HTTP/2 only: with HTTP/1 among the protocols an http:// URL
		// would be spoken to in HTTP/1.1.
		var protos http.Protocols
		protos.SetHTTP2(true)
		protos.SetUnencryptedHTTP2(true)
		t.Protocols = &protos
	}
	return &http.Client{Transport: t}
}

// bearer adds the Authorization header to every call, unary or stream.
type bearer string

func (b bearer) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set("Authorization", string(b))
		return next(ctx, req)
	}
}

func (b bearer) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("Authorization", string(b))
		return conn
	}
}

func (b bearer) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
