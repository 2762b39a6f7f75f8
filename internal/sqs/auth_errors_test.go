package sqs

import (
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sluice-mq/sluice/internal/auth"
)

// Every refusal, in both protocols: its code, status and failure reason,
// and that the broker saw nothing of it (no queue was created).
func TestAuthErrors(t *testing.T) {
	createAt := func(cred func(r *http.Request, at time.Time) *http.Request) func(a *authHarness, jsonProto bool) *http.Request {
		return func(a *authHarness, jsonProto bool) *http.Request {
			return cred(request(jsonProto, "CreateQueue", map[string]string{"QueueName": "refused"}), a.clock())
		}
	}
	signedBy := func(t *testing.T, c struct{ id, secret string }) func(r *http.Request, at time.Time) *http.Request {
		return func(r *http.Request, at time.Time) *http.Request {
			cred := alice
			cred.AccessKeyID, cred.SecretAccessKey = c.id, c.secret
			return sign(t, r, cred, at)
		}
	}
	cases := []struct {
		name   string
		req    func(a *authHarness, jsonProto bool) *http.Request
		code   string
		status int
		reason string
	}{
		{"no signature", createAt(func(r *http.Request, _ time.Time) *http.Request { return r }),
			"MissingAuthenticationToken", 403, auth.ReasonNoCredentials},
		{"unknown key", createAt(signedBy(t, struct{ id, secret string }{"AKIDNOBODY", "x"})),
			"InvalidClientTokenId", 403, auth.ReasonUnknownUser},
		{"wrong secret", createAt(signedBy(t, struct{ id, secret string }{alice.AccessKeyID, "not-alice-secret"})),
			"SignatureDoesNotMatch", 403, auth.ReasonBadCredentials},
		{"body changed after signing", func(a *authHarness, jsonProto bool) *http.Request {
			r := sign(t, request(jsonProto, "CreateQueue", map[string]string{"QueueName": "refused"}), alice, a.clock())
			other := request(jsonProto, "CreateQueue", map[string]string{"QueueName": "refusee"})
			r.Body, r.ContentLength = other.Body, other.ContentLength
			return r
		}, "SignatureDoesNotMatch", 403, auth.ReasonBadCredentials},
		{"header changed after signing", func(a *authHarness, jsonProto bool) *http.Request {
			r := sign(t, request(jsonProto, "CreateQueue", map[string]string{"QueueName": "refused"}), alice, a.clock())
			r.Host = "elsewhere.test"
			return r
		}, "SignatureDoesNotMatch", 403, auth.ReasonBadCredentials},
		{"header signature over UNSIGNED-PAYLOAD", func(a *authHarness, jsonProto bool) *http.Request {
			r := request(jsonProto, "CreateQueue", map[string]string{"QueueName": "refused"})
			r.Header.Set("X-Amz-Content-Sha256", unsignedPayload)
			if err := signer().SignHTTP(bg(), alice, r, unsignedPayload, "sqs", "us-east-1", a.clock()); err != nil {
				t.Fatal(err)
			}
			return r
		}, "SignatureDoesNotMatch", 403, auth.ReasonBadCredentials},
		{"X-Amz-Content-Sha256 not the body's", func(a *authHarness, jsonProto bool) *http.Request {
			r := request(jsonProto, "CreateQueue", map[string]string{"QueueName": "refused"})
			r.Header.Set("X-Amz-Content-Sha256", strings.Repeat("ab", 32))
			if err := signer().SignHTTP(bg(), alice, r, strings.Repeat("ab", 32), "sqs", "us-east-1", a.clock()); err != nil {
				t.Fatal(err)
			}
			return r
		}, "SignatureDoesNotMatch", 403, auth.ReasonBadCredentials},
		{"malformed header", createAt(func(r *http.Request, _ time.Time) *http.Request {
			r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDALICE/20260501/us-east-1/sqs/aws4_request, Signature=00")
			return r
		}), "IncompleteSignature", 400, auth.ReasonMalformed},
		{"other algorithm", createAt(func(r *http.Request, _ time.Time) *http.Request {
			r.Header.Set("Authorization", "AWS AKIDALICE:c2lnbmF0dXJl")
			return r
		}), "IncompleteSignature", 400, auth.ReasonMalformed},
		{"signature version 2", createAt(func(r *http.Request, _ time.Time) *http.Request {
			r.URL.RawQuery = "AWSAccessKeyId=AKIDALICE&SignatureVersion=2&SignatureMethod=HmacSHA256&Signature=c2ln"
			return r
		}), "IncompleteSignature", 400, auth.ReasonMalformed},
		{"signed 16 minutes ago", func(a *authHarness, jsonProto bool) *http.Request {
			return sign(t, request(jsonProto, "CreateQueue", map[string]string{"QueueName": "refused"}), alice, a.clock().Add(-16*time.Minute))
		}, "RequestExpired", 400, auth.ReasonExpired},
		{"signed 16 minutes ahead", func(a *authHarness, jsonProto bool) *http.Request {
			return sign(t, request(jsonProto, "CreateQueue", map[string]string{"QueueName": "refused"}), alice, a.clock().Add(16*time.Minute))
		}, "RequestExpired", 400, auth.ReasonExpired},
		{"no rights", createAt(signedBy(t, struct{ id, secret string }{bob.AccessKeyID, bob.SecretAccessKey})),
			"AccessDenied", 403, auth.ReasonDenied},
		{"wrong service", func(a *authHarness, jsonProto bool) *http.Request {
			r := request(jsonProto, "CreateQueue", map[string]string{"QueueName": "refused"})
			sum := bodyHash(t, r)
			if err := signer().SignHTTP(bg(), alice, r, sum, "sns", "us-east-1", a.clock()); err != nil {
				t.Fatal(err)
			}
			return r
		}, "SignatureDoesNotMatch", 403, auth.ReasonMalformed},
	}
	for _, jsonProto := range []bool{false, true} {
		for _, c := range cases {
			proto := map[bool]string{false: "query", true: "json"}[jsonProto]
			t.Run(proto+"/"+c.name, func(t *testing.T) {
				a := newAuthHarness(t)
				rec := a.serve(c.req(a, jsonProto))
				if got := errorCode(t, jsonProto, rec); got != c.code || rec.Code != c.status {
					t.Fatalf("answer %d %s (%s), want %d %s", rec.Code, got, rec.Body, c.status, c.code)
				}
				if n := a.failures(c.reason); n != 1 {
					t.Fatalf("failures{reason=%s} = %d, want 1 (all: %v)", c.reason, n, a.fails)
				}
				if qs := a.b.ListQueues(""); len(qs) != 0 {
					t.Fatalf("a refused request reached the broker: queues %v", qs)
				}
			})
		}
	}
}

// The same request signed right is served: the refusals above are theirs.
func TestAuthSignedRequestServed(t *testing.T) {
	for _, jsonProto := range []bool{false, true} {
		a := newAuthHarness(t)
		for _, at := range []time.Duration{0, -14 * time.Minute, 14 * time.Minute} {
			rec := a.serve(sign(t, request(jsonProto, "CreateQueue", map[string]string{"QueueName": "ok"}), alice, a.clock().Add(at)))
			if rec.Code != 200 {
				t.Fatalf("json=%v skew %v: %d %s", jsonProto, at, rec.Code, rec.Body)
			}
		}
		if qs := a.b.ListQueues(""); len(qs) != 1 || qs[0] != "ok" {
			t.Fatalf("queues %v", qs)
		}
	}
}

// A presigned URL (the SDK's PresignHTTP over a GET query request) works
// until X-Amz-Expires has passed, and then answers RequestExpired.
func TestAuthPresigned(t *testing.T) {
	a := newAuthHarness(t)
	if _, err := a.b.CreateQueue(brokerQueue("orders")); err != nil {
		t.Fatal(err)
	}
	presign := func(body string, expires time.Duration) string {
		q := url.Values{"Action": {"SendMessage"}, "QueueUrl": {"http://sqs.test/000000000000/orders"}, "MessageBody": {body},
			"X-Amz-Expires": {itoa(int(expires / time.Second))}}
		r, _ := http.NewRequest("GET", "http://sqs.test/?"+q.Encode(), nil)
		u, _, err := signer().PresignHTTP(bg(), carol, r, unsignedPayload, "sqs", "us-east-1", a.clock())
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	get := func(u string) (int, string) {
		r, _ := http.NewRequest("GET", u, nil)
		rec := a.serve(r)
		return rec.Code, rec.Body.String()
	}
	u := presign("presigned", 5*time.Minute)
	if !strings.Contains(u, "X-Amz-Signature=") {
		t.Fatalf("not presigned: %s", u)
	}
	if code, body := get(u); code != 200 {
		t.Fatalf("presigned send: %d %s", code, body)
	}
	a.advance(4 * time.Minute)
	if code, body := get(u); code != 200 {
		t.Fatalf("presigned send after 4 minutes: %d %s", code, body)
	}
	tampered := strings.Replace(u, "MessageBody=presigned", "MessageBody=tampered", 1)
	if code, body := get(tampered); code != 403 || !strings.Contains(body, "SignatureDoesNotMatch") {
		t.Fatalf("tampered presigned URL: %d %s", code, body)
	}
	a.advance(2 * time.Minute)
	if code, body := get(u); code != 400 || !strings.Contains(body, "RequestExpired") {
		t.Fatalf("expired presigned URL: %d %s", code, body)
	}
	if st, _ := a.b.QueueStats("orders"); st.Visible != 2 {
		t.Fatalf("visible %d, want the 2 sends before expiry", st.Visible)
	}
	if n := a.failures(auth.ReasonExpired); n != 1 {
		t.Fatalf("expired failures %d", n)
	}
	// A body the presigned URL does not cover is refused.
	r, _ := http.NewRequest("POST", presign("x", time.Minute), strings.NewReader("Action=PurgeQueue&QueueUrl=orders"))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if rec := a.serve(r); rec.Code != 403 {
		t.Fatalf("presigned URL with an unsigned body: %d %s", rec.Code, rec.Body)
	}
}

// A rotated secret takes effect at once: the signing-key cache never
// verifies with the secret it was derived from once the file says
// otherwise.
func TestRotatedSecretIsNotCached(t *testing.T) {
	a := newAuthHarness(t)
	send := func(cred aws.Credentials) int {
		return a.serve(sign(t, request(true, "ListQueues", nil), cred, a.clock())).Code
	}
	if code := send(alice); code != 200 {
		t.Fatalf("before rotation: %d", code)
	}
	rotated := strings.Replace(testUsersFile, "{id: AKIDALICE, secret: alice-secret}", "{id: AKIDALICE, secret: alice-new}", 1)
	if err := os.WriteFile(a.path, []byte(rotated), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.store.Reload(); err != nil {
		t.Fatal(err)
	}
	if code := send(alice); code != 403 {
		t.Fatalf("the old secret after rotation: %d", code)
	}
	if code := send(aws.Credentials{AccessKeyID: "AKIDALICE", SecretAccessKey: "alice-new"}); code != 200 {
		t.Fatalf("the new secret: %d", code)
	}
}
