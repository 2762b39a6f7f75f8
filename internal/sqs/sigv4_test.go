package sqs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/vfs"
)

// The AWS documentation's worked SigV4 example (IAM ListUsers, "create a
// signed AWS API request"): our canonical request, string to sign,
// signing key and signature must be the ones it shows.
func TestSigV4SpecExample(t *testing.T) {
	r := httptest.NewRequest("GET", "https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08", nil)
	r.Host = "iam.amazonaws.com"
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	r.Header.Set("X-Amz-Date", "20150830T123600Z")
	r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, "+
		"SignedHeaders=content-type;host;x-amz-date, Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7")
	q := r.URL.Query()
	s, ae := parseSigV4(r, q)
	if ae != nil {
		t.Fatal(ae)
	}
	empty := sha256.Sum256(nil)
	canonical := s.canonicalRequest(r, q, hex.EncodeToString(empty[:]))
	want := "GET\n/\nAction=ListUsers&Version=2010-05-08\ncontent-type:application/x-www-form-urlencoded; charset=utf-8\n" +
		"host:iam.amazonaws.com\nx-amz-date:20150830T123600Z\n\ncontent-type;host;x-amz-date\n" +
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	if canonical != want {
		t.Fatalf("canonical request\n%s\nwant\n%s", canonical, want)
	}
	if got := s.stringToSign(canonical); got != "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/iam/aws4_request\n"+
		"f536975d06c0309214f805bb90ccff089219ecd68b2577efef23edd43b7e1a59" {
		t.Fatalf("string to sign %q", got)
	}
	key := signingKey("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20150830", "us-east-1", "iam")
	if got := hex.EncodeToString(key); got != "c4afb1cc5771d871763a393e44b703571b55cc28424d1a5e86da6ed3c154a4b9" {
		t.Fatalf("signing key %s", got)
	}
	if !s.signatureMatches(key, canonical) {
		t.Fatal("the spec's signature does not verify")
	}
	if s.signatureMatches(signingKey("wrong", "20150830", "us-east-1", "iam"), canonical) {
		t.Fatal("a wrong secret verifies")
	}
}

func TestURIEncode(t *testing.T) {
	for _, c := range []struct{ in, want, wantPath string }{
		{"abcXYZ019-_.~", "abcXYZ019-_.~", "abcXYZ019-_.~"},
		{"a b+c*", "a%20b%2Bc%2A", "a%20b%2Bc%2A"},
		{"/x/%2F/é", "%2Fx%2F%252F%2F%C3%A9", "/x/%252F/%C3%A9"},
	} {
		if got := uriEncode(c.in, false); got != c.want {
			t.Errorf("uriEncode(%q) = %q, want %q", c.in, got, c.want)
		}
		if got := uriEncode(c.in, true); got != c.wantPath {
			t.Errorf("uriEncode(%q, path) = %q, want %q", c.in, got, c.wantPath)
		}
	}
}

// authHarness is the handler behind a file-backed auth store with three
// users: alice may do everything to every queue, carol may only send to
// "orders", bob is allowed nothing. Its clock is the test's.
type authHarness struct {
	t     *testing.T
	h     *Handler
	b     *broker.Broker
	store *auth.Store
	path  string

	mu    sync.Mutex
	now   time.Time
	fails map[string]int // protocol/reason -> count
}

var (
	alice = aws.Credentials{AccessKeyID: "AKIDALICE", SecretAccessKey: "alice-secret"}
	bob   = aws.Credentials{AccessKeyID: "AKIDBOB", SecretAccessKey: "bob-secret"}
	carol = aws.Credentials{AccessKeyID: "AKIDCAROL", SecretAccessKey: "carol-secret"}
	dave  = aws.Credentials{AccessKeyID: "AKIDDAVE", SecretAccessKey: "dave-secret"}
)

const testUsersFile = `users:
  - name: alice
    access_keys: [{id: AKIDALICE, secret: alice-secret}]
  - name: bob
    access_keys: [{id: AKIDBOB, secret: bob-secret}]
  - name: carol
    access_keys: [{id: AKIDCAROL, secret: carol-secret}]
  - name: dave
    access_keys: [{id: AKIDDAVE, secret: dave-secret}]
acls:
  - {user: alice, allow: [all], resources: ["queue:*"]}
  - {user: carol, allow: [produce], resources: ["queue:orders"]}
  - {user: dave, allow: [consume], resources: ["topic:events"]}
`

func newAuthHarness(t *testing.T) *authHarness {
	t.Helper()
	a := &authHarness{t: t, now: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC), fails: map[string]int{}}
	a.path = filepath.Join(t.TempDir(), "users.yaml")
	if err := os.WriteFile(a.path, []byte(testUsersFile), 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := auth.Open(a.path, auth.Options{OnFailure: func(p, r string) {
		a.mu.Lock()
		a.fails[p+"/"+r]++
		a.mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.Open(broker.Options{Dir: t.TempDir(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	a.store, a.b = store, b
	a.h = NewHandler(b, Config{AdvertisedURL: "http://sqs.test", Logger: quiet(), Auth: store, Now: a.clock})
	return a
}

func (a *authHarness) clock() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.now
}

func (a *authHarness) advance(d time.Duration) {
	a.mu.Lock()
	a.now = a.now.Add(d)
	a.mu.Unlock()
}

func (a *authHarness) failures(reason string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.fails["sqs/"+reason]
}

// request builds an unsigned request of action in either protocol.
func request(jsonProto bool, action string, params map[string]string) *http.Request {
	if jsonProto {
		body, _ := json.Marshal(params)
		r := httptest.NewRequest("POST", "http://sqs.test/", bytes.NewReader(body))
		r.Header.Set("Content-Type", jsonContentType)
		r.Header.Set("X-Amz-Target", "AmazonSQS."+action)
		return r
	}
	v := url.Values{"Action": {action}}
	for k, p := range params {
		v.Set(k, p)
	}
	r := httptest.NewRequest("POST", "http://sqs.test/", strings.NewReader(v.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return r
}

// sign signs r in the header form with the SDK's signer at time at.
func sign(t *testing.T, r *http.Request, cred aws.Credentials, at time.Time) *http.Request {
	t.Helper()
	var body []byte
	if r.Body != nil {
		body, _ = readAll(r)
	}
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(context.Background(), cred, r, hex.EncodeToString(sum[:]), "sqs", "us-east-1", at); err != nil {
		t.Fatal(err)
	}
	return r
}

func readAll(r *http.Request) ([]byte, error) {
	var buf bytes.Buffer
	_, err := buf.ReadFrom(r.Body)
	r.Body.Close()
	b := buf.Bytes()
	r.Body = readCloser{bytes.NewReader(b)}
	r.ContentLength = int64(len(b))
	return b, err
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

func (a *authHarness) serve(r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, r)
	return rec
}

// errorCode reads the code an answer carries in its protocol: the query
// protocol's <Code>, the JSON protocol's x-amzn-query-error.
func errorCode(t *testing.T, jsonProto bool, rec *httptest.ResponseRecorder) string {
	t.Helper()
	if jsonProto {
		var v struct {
			Type string `json:"__type"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil || v.Type == "" {
			t.Fatalf("answer is not a JSON error: %q", rec.Body)
		}
		code, _, _ := strings.Cut(rec.Header().Get("x-amzn-query-error"), ";")
		return code
	}
	var v xmlErrorResponse
	if err := xml.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatalf("answer is not an XML error: %q", rec.Body)
	}
	return v.Code
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func signer() *v4.Signer                           { return v4.NewSigner() }
func bg() context.Context                          { return context.Background() }
func itoa(n int) string                            { return strconv.Itoa(n) }
func brokerQueue(name string) broker.QueueSettings { return broker.QueueSettings{Name: name} }

// bodyHash is the hex SHA-256 of r's body (left readable).
func bodyHash(t *testing.T, r *http.Request) string {
	t.Helper()
	b, err := readAll(r)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// BenchmarkAuthenticate is the verification one signed SendMessage of a
// 1 KiB body costs: parse, canonicalise, derive the key, compare.
func BenchmarkAuthenticate(b *testing.B) {
	store, err := auth.NewStatic(&auth.File{Users: []auth.User{{Name: "alice",
		AccessKeys: []auth.AccessKey{{ID: alice.AccessKeyID, Secret: alice.SecretAccessKey}}}}}, auth.Options{})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	h := NewHandler(nil, Config{Auth: store, Logger: quiet(), Now: func() time.Time { return now }})
	r := request(true, "SendMessage", map[string]string{"QueueUrl": "http://sqs.test/000000000000/q", "MessageBody": strings.Repeat("x", 1024)})
	body, _ := readAll(r)
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(context.Background(), alice, r, hex.EncodeToString(sum[:]), "sqs", "us-east-1", now); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		c := &call{}
		if err := h.authenticate(r, c, body); err != nil || c.principal != "alice" {
			b.Fatal(err)
		}
	}
}

// BenchmarkSendMessage is one signed 1 KiB SendMessage through the whole
// handler (a broker on an in-memory FS), without authentication and with
// SigV4 verified: the difference is what verification costs a request.
func BenchmarkSendMessage(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(map[bool]string{false: "auth=off", true: "auth=sigv4"}[on], func(b *testing.B) {
			br, err := broker.Open(broker.Options{Dir: "/bench", FS: vfs.NewMem(), Logger: quiet()})
			if err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			if _, err := br.CreateQueue(broker.QueueSettings{Name: "q"}); err != nil {
				b.Fatal(err)
			}
			cfg := Config{AdvertisedURL: "http://sqs.test", Logger: quiet()}
			if on {
				cfg.Auth, err = auth.NewStatic(&auth.File{Users: []auth.User{{Name: "alice",
					AccessKeys: []auth.AccessKey{{ID: alice.AccessKeyID, Secret: alice.SecretAccessKey}}}},
					ACLs: []auth.Rule{{User: "alice", Allow: []auth.Operation{auth.All}, Resources: []auth.Pattern{"*"}}}}, auth.Options{})
				if err != nil {
					b.Fatal(err)
				}
			}
			h := NewHandler(br, cfg)
			body := []byte(`{"QueueUrl":"http://sqs.test/000000000000/q","MessageBody":"` + strings.Repeat("x", 1024) + `"}`)
			sum := sha256.Sum256(body)
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest("POST", "http://sqs.test/", bytes.NewReader(body))
				r.Header.Set("Content-Type", jsonContentType)
				r.Header.Set("X-Amz-Target", "AmazonSQS.SendMessage")
				if err := v4.NewSigner().SignHTTP(context.Background(), alice, r, hex.EncodeToString(sum[:]), "sqs", "us-east-1", time.Now()); err != nil {
					b.Fatal(err)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, r)
				if rec.Code != 200 {
					b.Fatalf("%d %s", rec.Code, rec.Body)
				}
			}
		})
	}
}
