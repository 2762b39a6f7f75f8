package sqs

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/auth"
)

// FuzzSigV4 feeds arbitrary Authorization headers, query strings, paths,
// header values and bodies through the SigV4 parser, canonicaliser and
// verifier. Any outcome is fine but a panic, an error that is not one of
// the authentication errors, or an acceptance: nothing here knows a
// secret, so nothing may verify.
func FuzzSigV4(f *testing.F) {
	store, err := auth.NewStatic(&auth.File{Users: []auth.User{{Name: "alice",
		AccessKeys: []auth.AccessKey{{ID: "AKIDALICE", Secret: "alice-secret"}}}}}, auth.Options{})
	if err != nil {
		f.Fatal(err)
	}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	h := NewHandler(nil, Config{Auth: store, Logger: quiet(), Now: func() time.Time { return now }})
	f.Add("AWS4-HMAC-SHA256 Credential=AKIDALICE/20260501/us-east-1/sqs/aws4_request, SignedHeaders=host;x-amz-date, Signature=00ff",
		"", "/", "20260501T120000Z", []byte("Action=ListQueues"))
	f.Add("", "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDALICE%2F20260501%2Fus-east-1%2Fsqs%2Faws4_request&X-Amz-Date=20260501T120000Z&X-Amz-Expires=60&X-Amz-SignedHeaders=host&X-Amz-Signature=abc&Action=SendMessage&MessageBody=a+b",
		"/000000000000/q", "", []byte(nil))
	f.Add("AWS4-HMAC-SHA256 Credential=/x//sqs/aws4_request,SignedHeaders=;;,Signature=", "a=%ZZ", "/%2F/../x", "garbage", []byte{0xff})
	f.Add("AWS4-HMAC-SHA256 ,,,=,Credential==", "X-Amz-Expires=-1&X-Amz-Algorithm=AWS4-HMAC-SHA256", "//", "20261301T250000Z", []byte("{}"))
	f.Fuzz(func(t *testing.T, authz, rawQuery, path, date string, body []byte) {
		r := httptest.NewRequest("POST", "http://sqs.test/", bytes.NewReader(body))
		r.URL.Path, r.URL.RawPath, r.URL.RawQuery = path, "", rawQuery
		if authz != "" {
			r.Header.Set("Authorization", authz)
		}
		if date != "" {
			r.Header.Set("X-Amz-Date", date)
		}
		err := h.authenticate(r, &call{}, body)
		var ae *apiError
		if !errors.As(err, &ae) {
			t.Fatalf("authenticate answered %v (%T), want an authentication error", err, err)
		}
		switch ae.kind {
		case errMissingAuthToken, errInvalidClientToken, errSignatureMismatch, errIncompleteSignature, errRequestExpired, errMalformedQuery:
		default:
			t.Fatalf("authenticate answered %v", ae)
		}
		// The canonical form of whatever parsed is well formed: six
		// newline-separated parts before the headers, encodings only
		// of unreserved characters and %XX.
		q, qerr := url.ParseQuery(rawQuery)
		if qerr != nil {
			return
		}
		if s, perr := parseSigV4(r, q); perr == nil {
			c := s.canonicalRequest(r, q, unsignedPayload)
			if !strings.HasPrefix(c, "POST\n") || !strings.HasSuffix(c, "\n"+unsignedPayload) {
				t.Fatalf("canonical request %q", c)
			}
			for _, part := range []string{canonicalURI(r), canonicalQuery(q, s.presigned)} {
				if strings.ContainsAny(part, " \n+") {
					t.Fatalf("canonical part %q holds an unencoded byte", part)
				}
			}
		}
	})
}

// hasSignature must see any of the ways a request may carry one.
func TestHasSignature(t *testing.T) {
	r, _ := http.NewRequest("GET", "http://sqs.test/", nil)
	if hasSignature(r, url.Values{}) {
		t.Fatal("an unsigned request has a signature")
	}
	for _, k := range []string{"X-Amz-Algorithm", "X-Amz-Signature", "X-Amz-Credential", "SignatureVersion"} {
		if !hasSignature(r, url.Values{k: {"x"}}) {
			t.Fatalf("%s not seen", k)
		}
	}
}
