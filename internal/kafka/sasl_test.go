package kafka

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
)

// testUsers is the users file of the SASL tests: alice produces and
// consumes the orders* topics in g* groups, bob may only consume orders,
// admin may do anything, admin2 may produce to and describe orders but not
// consume it.
const testUsers = `
users:
  - {name: alice, password: alice-secret}
  - {name: bob, password: bob-secret}
  - {name: admin, password: admin-secret}
  - {name: admin2, password: admin2-secret}
acls:
  - {user: alice, allow: [produce, consume], resources: ["topic:orders*", "group:g*"]}
  - {user: bob, allow: [consume], resources: ["topic:orders", "group:*"]}
  - {user: admin, allow: [all], resources: ["*"]}
  - {user: admin2, allow: [describe, produce], resources: ["topic:orders"]}
`

// authNode is a node whose front-end authenticates against a users file.
type authNode struct {
	*node
	path  string
	store *auth.Store
	fails *failCounter
}

type failCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (f *failCounter) add(_, reason string) {
	f.mu.Lock()
	f.n[reason]++
	f.mu.Unlock()
}

func (f *failCounter) get(reason string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n[reason]
}

// startAuthNode serves Kafka with authentication on, over users (a users
// file's YAML) written to a temporary file, and the topics given created
// through the broker.
func startAuthNode(t testing.TB, users string, cfg Config, topics ...string) *authNode {
	t.Helper()
	path := filepath.Join(t.TempDir(), "users.yaml")
	if err := os.WriteFile(path, []byte(users), 0o600); err != nil {
		t.Fatal(err)
	}
	fails := &failCounter{n: map[string]int{}}
	st, err := auth.Open(path, auth.Options{Logger: quietLogger(), OnFailure: fails.add})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Auth = st
	n := startNodeWith(t, "", broker.SyncPolicy{Mode: broker.SyncNever}, cfg)
	for _, name := range topics {
		if _, err := n.b.CreateTopic(broker.TopicSettings{Name: name, Partitions: 2}); err != nil {
			t.Fatal(err)
		}
	}
	return &authNode{node: n, path: path, store: st, fails: fails}
}

func plainMech(user, pass string) sasl.Mechanism {
	return plain.Auth{User: user, Pass: pass}.AsMechanism()
}

func scram256(user, pass string) sasl.Mechanism {
	return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
}

func scram512(user, pass string) sasl.Mechanism {
	return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
}

var testMechs = []struct {
	name string
	mech func(user, pass string) sasl.Mechanism
}{{"PLAIN", plainMech}, {"SCRAM-SHA-256", scram256}, {"SCRAM-SHA-512", scram512}}

// as is a franz-go client authenticated with m.
func (n *authNode) as(m sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
	return n.client(append([]kgo.Opt{kgo.SASL(m), kgo.RetryTimeout(2 * time.Second)}, opts...)...)
}

// TestSASLFranz: franz-go's sasl/plain and sasl/scram produce and consume
// in a group through every mechanism.
func TestSASLFranz(t *testing.T) {
	n := startAuthNode(t, testUsers, Config{}, "orders")
	for _, m := range testMechs {
		t.Run(m.name, func(t *testing.T) {
			ctx := testCtx(t, 30*time.Second)
			cl := n.as(m.mech("alice", "alice-secret"))
			var recs []*kgo.Record
			for i := range 10 {
				recs = append(recs, &kgo.Record{Topic: "orders", Value: []byte{byte(i)}})
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			cons := n.as(m.mech("alice", "alice-secret"), kgo.ConsumeTopics("orders"),
				kgo.ConsumerGroup("g-"+m.name), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			got := 0
			for got < 10*(1+indexOfMech(m.name)) {
				fs := cons.PollFetches(ctx)
				if err := fs.Err0(); err != nil {
					t.Fatalf("consume: %v", err)
				}
				got += fs.NumRecords()
			}
			if err := cons.CommitUncommittedOffsets(ctx); err != nil {
				t.Fatalf("commit: %v", err)
			}
		})
	}
}

func indexOfMech(name string) int {
	for i, m := range testMechs {
		if m.name == name {
			return i
		}
	}
	return -1
}

// TestSASLWrongPassword: a wrong password or an unknown user fails with
// SASL_AUTHENTICATION_FAILED in every mechanism, counted as a failure.
func TestSASLWrongPassword(t *testing.T) {
	n := startAuthNode(t, testUsers, Config{}, "orders")
	for _, m := range testMechs {
		for _, who := range [][2]string{{"alice", "wrong"}, {"mallory", "alice-secret"}} {
			t.Run(m.name+"/"+who[0], func(t *testing.T) {
				cl := n.as(m.mech(who[0], who[1]))
				err := cl.Ping(testCtx(t, 10*time.Second))
				if !errors.Is(err, kerr.SaslAuthenticationFailed) {
					t.Fatalf("ping: %v, want SASL_AUTHENTICATION_FAILED", err)
				}
			})
		}
	}
	if got := n.fails.get(auth.ReasonBadCredentials); got < len(testMechs)*2 {
		t.Errorf("%d bad_credentials failures counted", got)
	}
}

// TestTopicAuthorizationFailed: bob may consume orders but not produce to
// it; the produce fails with TOPIC_AUTHORIZATION_FAILED and stores nothing.
func TestTopicAuthorizationFailed(t *testing.T) {
	n := startAuthNode(t, testUsers, Config{}, "orders")
	cl := n.as(scram256("bob", "bob-secret"), kgo.DisableIdempotentWrite())
	err := cl.ProduceSync(testCtx(t, 10*time.Second), &kgo.Record{Topic: "orders", Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	// The idempotent producer is refused earlier: bob may write nowhere.
	idem := n.as(scram256("bob", "bob-secret"))
	err = idem.ProduceSync(testCtx(t, 10*time.Second), &kgo.Record{Topic: "orders", Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.ClusterAuthorizationFailed) && !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("idempotent produce: %v", err)
	}
	for p := range int32(2) {
		n.expectEmpty("orders", p)
	}
	if n.fails.get(auth.ReasonDenied) == 0 {
		t.Error("no denial counted")
	}
}

// TestUnauthenticatedNeverReachesBroker: before authenticating, only
// ApiVersions and the SASL requests are handled; a Produce (or Metadata)
// closes the connection without reaching its handler, and the broker's
// partition is unchanged.
func TestUnauthenticatedNeverReachesBroker(t *testing.T) {
	n := startAuthNode(t, testUsers, Config{}, "orders")
	var handled sync.Map
	n.s.testHookHandling = func(req kmsg.Request) { handled.Store(req.Key(), true) }
	for _, req := range []kmsg.Request{
		produceReq(9, -1, "orders", 0, buildBatch(t, 3, nil)),
		produceReq(9, 0, "orders", 0, buildBatch(t, 3, nil)),
		kmsg.NewPtrMetadataRequest(),
		kmsg.NewPtrCreateTopicsRequest(),
	} {
		r := n.raw()
		if av := r.do(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse); av.ErrorCode != 0 {
			t.Fatalf("ApiVersions: %d", av.ErrorCode)
		}
		r.send(req)
		r.expectClosed()
		if _, ok := handled.Load(req.Key()); ok {
			t.Fatalf("%s reached its handler unauthenticated", kmsg.NameForKey(req.Key()))
		}
	}
	n.expectEmpty("orders", 0)
	if n.fails.get(auth.ReasonNoCredentials) != 4 {
		t.Errorf("%d no_credentials failures counted, want 4", n.fails.get(auth.ReasonNoCredentials))
	}
	// A franz-go client without SASL fails too, and the topic stays empty.
	err := n.client().ProduceSync(testCtx(t, time.Second), &kgo.Record{Topic: "orders", Value: []byte("x")}).FirstErr()
	if err == nil {
		t.Fatal("an unauthenticated produce succeeded")
	}
	n.expectEmpty("orders", 0)
}

// expectEmpty checks nothing was stored in the partition.
func (n *authNode) expectEmpty(topic string, p int32) {
	n.t.Helper()
	at, err := n.b.ListOffsets(topic, p, -1)
	if err != nil || at.Offset != 0 {
		n.t.Fatalf("%s/%d: latest offset %d, %v; want 0", topic, p, at.Offset, err)
	}
}

// saslV1 authenticates a raw connection with PLAIN through SaslHandshake
// v1 and SaslAuthenticate v1, returning the SaslAuthenticate answer.
func (r *rawConn) saslPlainV1(user, pass string) *kmsg.SASLAuthenticateResponse {
	r.t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = "PLAIN"
	if resp := r.do(hs).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
		r.t.Fatalf("handshake: %d", resp.ErrorCode)
	}
	a := kmsg.NewPtrSASLAuthenticateRequest()
	a.SetVersion(1)
	a.SASLAuthBytes = []byte("\x00" + user + "\x00" + pass)
	return r.do(a).(*kmsg.SASLAuthenticateResponse)
}

func metadataOK(r *rawConn) {
	r.t.Helper()
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(9)
	r.do(md)
}

// fakeClock is an injected clock.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// TestSessionLifetime: SaslAuthenticate v1 reports the session lifetime
// (KIP-368); a request after it ends closes the connection; a
// re-authentication before then starts a new session, and must keep the
// principal.
func TestSessionLifetime(t *testing.T) {
	clock := &fakeClock{}
	clock.ns.Store(time.Now().UnixNano())
	n := startAuthNode(t, testUsers, Config{SessionLifetime: time.Minute, Now: clock.now}, "orders")

	r := n.raw()
	resp := r.saslPlainV1("alice", "alice-secret")
	if resp.ErrorCode != 0 || resp.SessionLifetimeMillis != 60_000 {
		t.Fatalf("authenticate: code %d, lifetime %d ms", resp.ErrorCode, resp.SessionLifetimeMillis)
	}
	metadataOK(r)
	clock.advance(61 * time.Second)
	r.send(kmsg.NewPtrMetadataRequest())
	r.expectClosed()

	r = n.raw()
	r.saslPlainV1("alice", "alice-secret")
	clock.advance(50 * time.Second)
	if resp := r.saslPlainV1("alice", "alice-secret"); resp.ErrorCode != 0 || resp.SessionLifetimeMillis != 60_000 {
		t.Fatalf("re-authenticate: %+v", resp)
	}
	clock.advance(50 * time.Second) // 100 s after the first, 50 s into the second
	metadataOK(r)
	if resp := r.saslPlainV1("bob", "bob-secret"); resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("re-authenticating as another user: code %d", resp.ErrorCode)
	}
	r.expectClosed()
}

// TestSessionLifetimeFranz: franz-go re-authenticates on its own before
// the session ends (KIP-368), so a producer keeps working across several
// lifetimes on its connections, which the server never has to close.
func TestSessionLifetimeFranz(t *testing.T) {
	n := startAuthNode(t, testUsers, Config{SessionLifetime: 500 * time.Millisecond}, "orders")
	var connects, disconnects atomic.Int32
	cl := n.as(scram256("alice", "alice-secret"), kgo.WithHooks(connHooks{&connects, &disconnects}))
	ctx := testCtx(t, 30*time.Second)
	deadline := time.Now().Add(2 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Four lifetimes passed; re-authenticating, the client kept the
	// connections it opened (the seed, the broker, its metadata one).
	if c, d := connects.Load(), disconnects.Load(); c > 3 || d > 0 {
		t.Fatalf("%d connections opened, %d closed: the client did not re-authenticate in place", c, d)
	}
}

type connHooks struct{ connects, disconnects *atomic.Int32 }

func (h connHooks) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil {
		h.connects.Add(1)
	}
}

func (h connHooks) OnBrokerDisconnect(kgo.BrokerMetadata, net.Conn) { h.disconnects.Add(1) }

// TestSASLStateErrors: out-of-order SASL requests.
func TestSASLStateErrors(t *testing.T) {
	n := startAuthNode(t, testUsers, Config{}, "orders")
	// An unknown mechanism lists ours and closes.
	r := n.raw()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = "GSSAPI"
	if resp := r.do(hs).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != kerr.UnsupportedSaslMechanism.Code || len(resp.SupportedMechanisms) != 3 {
		t.Fatalf("GSSAPI: %+v", resp)
	}
	r.expectClosed()
	// SaslAuthenticate without a handshake closes.
	r = n.raw()
	a := kmsg.NewPtrSASLAuthenticateRequest()
	a.SetVersion(1)
	if resp := r.do(a).(*kmsg.SASLAuthenticateResponse); resp.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("authenticate first: %+v", resp)
	}
	r.expectClosed()
	// After authenticating, a stray SaslAuthenticate is refused but the
	// connection stays.
	r = n.raw()
	r.saslPlainV1("alice", "alice-secret")
	if resp := r.do(a).(*kmsg.SASLAuthenticateResponse); resp.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("stray authenticate: %+v", resp)
	}
	metadataOK(r)
	// A re-authentication must keep the mechanism.
	hs.Mechanism = "SCRAM-SHA-256"
	if resp := r.do(hs).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != kerr.UnsupportedSaslMechanism.Code {
		t.Fatalf("mechanism change: %+v", resp)
	}
	r.expectClosed()
	// PLAIN with an authzid other than the user is refused.
	r = n.raw()
	hs.Mechanism = "PLAIN"
	r.do(hs)
	a.SASLAuthBytes = []byte("admin\x00alice\x00alice-secret")
	if resp := r.do(a).(*kmsg.SASLAuthenticateResponse); resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || resp.ErrorMessage == nil {
		t.Fatalf("authzid: %+v", resp)
	}
	r.expectClosed()
}

// TestSASLOff: with authentication off the SASL requests answer
// ILLEGAL_SASL_STATE and the connection goes on, as on Kafka's PLAINTEXT
// listener.
func TestSASLOff(t *testing.T) {
	n := startNode(t, "")
	r := n.raw()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = "PLAIN"
	if resp := r.do(hs).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("handshake: %+v", resp)
	}
	metadataOK(r)
}

// scramSession runs franz-go's SCRAM client by hand, for raw exchanges.
func scramSession(t testing.TB, m sasl.Mechanism) (sasl.Session, []byte) {
	t.Helper()
	s, first, err := m.Authenticate(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return s, first
}

// TestSASLHandshakeV0Raw: after SaslHandshake v0 the exchange runs in raw
// size-prefixed tokens (no Kafka header), as old clients send it.
func TestSASLHandshakeV0Raw(t *testing.T) {
	n := startAuthNode(t, testUsers, Config{}, "orders")
	handshake := func(r *rawConn, mech string) {
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Mechanism = mech
		if resp := r.do(hs).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
			t.Fatalf("handshake v0: %d", resp.ErrorCode)
		}
	}
	rawToken := func(r *rawConn, b []byte) {
		if _, err := r.c.Write(append([]byte{0, 0, 0, byte(len(b))}, b...)); err != nil {
			t.Fatal(err)
		}
	}
	// PLAIN: one token, an empty answer.
	r := n.raw()
	handshake(r, "PLAIN")
	rawToken(r, []byte("\x00alice\x00alice-secret"))
	if b, err := r.frame(); err != nil || len(b) != 0 {
		t.Fatalf("PLAIN answer %q %v", b, err)
	}
	metadataOK(r)
	// A wrong PLAIN password closes.
	r = n.raw()
	handshake(r, "PLAIN")
	rawToken(r, []byte("\x00alice\x00nope"))
	r.expectClosed()
	// SCRAM: client-first, server-first, client-final, server-final.
	for _, pass := range []string{"alice-secret", "nope"} {
		r = n.raw()
		handshake(r, "SCRAM-SHA-512")
		sess, first := scramSession(t, scram512("alice", pass))
		rawToken(r, first)
		serverFirst, err := r.frame()
		if err != nil {
			t.Fatal(err)
		}
		_, final, err := sess.Challenge(serverFirst)
		if err != nil {
			t.Fatal(err)
		}
		rawToken(r, final)
		serverFinal, err := r.frame()
		if err != nil {
			t.Fatal(err)
		}
		if pass != "alice-secret" {
			if string(serverFinal) != "e=invalid-proof" {
				t.Fatalf("server-final %q", serverFinal)
			}
			r.expectClosed()
			continue
		}
		if done, _, err := sess.Challenge(serverFinal); err != nil || !done {
			t.Fatalf("server signature: %v %v", done, err)
		}
		metadataOK(r)
	}
}

// TestFailedAuthDelay: a failed login is answered after FailedAuthDelay
// (Kafka's connection.failed.authentication.delay.ms), a good one at once.
func TestFailedAuthDelay(t *testing.T) {
	const delay = 300 * time.Millisecond
	n := startAuthNode(t, testUsers, Config{FailedAuthDelay: delay}, "orders")
	for _, c := range []struct {
		pass   string
		code   int16
		slower bool
	}{{"alice-secret", 0, false}, {"wrong", kerr.SaslAuthenticationFailed.Code, true}} {
		r := n.raw()
		start := time.Now()
		resp := r.saslPlainV1("alice", c.pass)
		took := time.Since(start)
		if resp.ErrorCode != c.code || (took >= delay) != c.slower {
			t.Errorf("password %q: code %d after %v", c.pass, resp.ErrorCode, took)
		}
	}
}

// TestUsersFileChangesReachOpenConnections: a rule added to the users
// file applies to the next request of a connection already open; a user
// removed from it keeps its connection only until the session ends and
// cannot re-authenticate.
func TestUsersFileChangesReachOpenConnections(t *testing.T) {
	clock := &fakeClock{}
	clock.ns.Store(time.Now().UnixNano())
	n := startAuthNode(t, testUsers, Config{SessionLifetime: time.Minute, Now: clock.now}, "orders")
	bob, alice := n.asUser("bob"), n.asUser("alice")
	produce := func() int16 {
		return firstTopicCode(bob.do(produceReq(9, -1, "orders", 0, buildBatch(t, 1, nil))), "orders")
	}
	if code := produce(); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("before the grant: %v", kerr.ErrorForCode(code))
	}
	edited := strings.Replace(testUsers, `{user: bob, allow: [consume]`, `{user: bob, allow: [consume, produce]`, 1)
	edited = strings.Replace(edited, "  - {name: alice, password: alice-secret}\n", "", 1)
	if err := os.WriteFile(n.path, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := n.store.Reload(); err != nil {
		t.Fatal(err)
	}
	if code := produce(); code != 0 {
		t.Fatalf("after the grant, same connection: %v", kerr.ErrorForCode(code))
	}
	// alice was removed: her open connection lasts until its session ends.
	metadataOK(alice)
	clock.advance(time.Minute)
	alice.send(kmsg.NewPtrMetadataRequest())
	alice.expectClosed()
	r := n.raw()
	if resp := r.saslPlainV1("alice", "alice-secret"); resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("removed user logged in: %+v", resp)
	}
}
