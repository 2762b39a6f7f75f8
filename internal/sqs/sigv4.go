package sqs

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// AWS Signature Version 4, as the AWS "create a signed request" spec
// describes it, in the two forms SQS clients send: an Authorization header,
// or the same fields in the query string (a presigned URL). This file only
// parses and canonicalises; auth.go decides what a result means.

const (
	sigV4Algorithm  = "AWS4-HMAC-SHA256"
	sigV4Terminator = "aws4_request"
	sigV4Service    = "sqs"
	amzDateFormat   = "20060102T150405Z"
	unsignedPayload = "UNSIGNED-PAYLOAD"
	// maxClockSkew is how far a signature's time may be from the server's,
	// either way, as AWS allows.
	maxClockSkew = 15 * time.Minute
	// maxPresignExpiry is the longest X-Amz-Expires SigV4 allows (7 days).
	maxPresignExpiry = 7 * 24 * time.Hour
)

// sigV4 is one request's signature, parsed but not yet verified.
type sigV4 struct {
	presigned     bool
	keyID         string
	scopeDate     string // yyyymmdd of the credential scope
	region        string
	service       string
	amzDate       string // yyyymmddThhmmssZ, as signed
	at            time.Time
	expires       time.Duration // presigned only
	signedHeaders []string
	signature     string // hex, as sent
	payloadHash   string // X-Amz-Content-Sha256 as sent ("" if absent)
}

// scope is the credential scope the string to sign names.
func (s *sigV4) scope() string {
	return s.scopeDate + "/" + s.region + "/" + s.service + "/" + sigV4Terminator
}

// hasSignature reports whether a request carries any SigV4 signature.
func hasSignature(r *http.Request, q url.Values) bool {
	return r.Header.Get("Authorization") != "" || q.Has("X-Amz-Algorithm") ||
		q.Has("X-Amz-Signature") || q.Has("X-Amz-Credential") || q.Has("SignatureVersion")
}

// parseSigV4 reads the signature of r from its Authorization header or,
// without one, its query string q. Every error is IncompleteSignature:
// the request does not say, in SigV4's terms, who signed it and how.
func parseSigV4(r *http.Request, q url.Values) (*sigV4, *apiError) {
	if h := r.Header.Get("Authorization"); h != "" {
		return parseAuthorization(r, h)
	}
	if v := q.Get("SignatureVersion"); v != "" && !q.Has("X-Amz-Algorithm") {
		return nil, incomplete("Signature Version %q is not supported: sign requests with %s (Signature Version 4).", truncate(v, 10), sigV4Algorithm)
	}
	return parsePresigned(q)
}

func incomplete(format string, args ...any) *apiError {
	return newError(errIncompleteSignature, format, args...)
}

// parseAuthorization reads
//
//	AWS4-HMAC-SHA256 Credential=<id>/<date>/<region>/sqs/aws4_request,
//	SignedHeaders=<a;b;c>, Signature=<hex>
//
// with the time from X-Amz-Date (or Date).
func parseAuthorization(r *http.Request, h string) (*sigV4, *apiError) {
	alg, rest, _ := strings.Cut(strings.TrimSpace(h), " ")
	if alg != sigV4Algorithm {
		return nil, incomplete("Unsupported authorization type %q: sign requests with %s (Signature Version 4).", truncate(alg, 40), sigV4Algorithm)
	}
	fields := map[string]string{}
	for _, part := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			if strings.TrimSpace(part) == "" {
				continue
			}
			return nil, incomplete("Authorization header has a malformed element %q.", truncate(part, 40))
		}
		fields[k] = v
	}
	for _, k := range []string{"Credential", "SignedHeaders", "Signature"} {
		if fields[k] == "" {
			return nil, incomplete("Authorization header requires '%s' parameter.", k)
		}
	}
	s := &sigV4{signature: fields["Signature"], payloadHash: r.Header.Get("X-Amz-Content-Sha256")}
	if err := s.setCredential(fields["Credential"]); err != nil {
		return nil, err
	}
	if err := s.setSignedHeaders(fields["SignedHeaders"]); err != nil {
		return nil, err
	}
	date := r.Header.Get("X-Amz-Date")
	if date == "" {
		// SigV4 allows the Date header instead; the string to sign still
		// names the time in the ISO 8601 basic form.
		d := r.Header.Get("Date")
		if d == "" {
			return nil, incomplete("Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.")
		}
		t, err := http.ParseTime(d)
		if err != nil {
			return nil, incomplete("Date header %q is not an HTTP date.", truncate(d, 40))
		}
		date = t.UTC().Format(amzDateFormat)
	}
	if err := s.setDate(date); err != nil {
		return nil, err
	}
	return s, nil
}

// parsePresigned reads the X-Amz-* query parameters of a presigned URL.
func parsePresigned(q url.Values) (*sigV4, *apiError) {
	for _, k := range []string{"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders", "X-Amz-Signature"} {
		if q.Get(k) == "" {
			return nil, incomplete("A presigned request requires the '%s' parameter.", k)
		}
	}
	if alg := q.Get("X-Amz-Algorithm"); alg != sigV4Algorithm {
		return nil, incomplete("Unsupported X-Amz-Algorithm %q: sign requests with %s.", truncate(alg, 40), sigV4Algorithm)
	}
	s := &sigV4{presigned: true, signature: q.Get("X-Amz-Signature"), payloadHash: q.Get("X-Amz-Content-Sha256")}
	if err := s.setCredential(q.Get("X-Amz-Credential")); err != nil {
		return nil, err
	}
	if err := s.setSignedHeaders(q.Get("X-Amz-SignedHeaders")); err != nil {
		return nil, err
	}
	if err := s.setDate(q.Get("X-Amz-Date")); err != nil {
		return nil, err
	}
	n, err := strconv.ParseInt(q.Get("X-Amz-Expires"), 10, 64)
	if err != nil || n < 1 || n > int64(maxPresignExpiry/time.Second) {
		return nil, incomplete("X-Amz-Expires must be a number of seconds from 1 to %d.", int64(maxPresignExpiry/time.Second))
	}
	s.expires = time.Duration(n) * time.Second
	return s, nil
}

// setCredential reads <id>/<yyyymmdd>/<region>/<service>/aws4_request.
func (s *sigV4) setCredential(c string) *apiError {
	parts := strings.Split(c, "/")
	if len(parts) != 5 || parts[0] == "" || parts[2] == "" || parts[4] != sigV4Terminator {
		return incomplete("Credential %q is not of the form <access key id>/<date>/<region>/%s/%s.", truncate(c, 80), sigV4Service, sigV4Terminator)
	}
	if _, err := time.Parse("20060102", parts[1]); err != nil {
		return incomplete("Credential scope date %q is not of the form yyyymmdd.", truncate(parts[1], 20))
	}
	s.keyID, s.scopeDate, s.region, s.service = parts[0], parts[1], parts[2], parts[3]
	return nil
}

// setSignedHeaders reads a;b;c. Host must be among them: without it a
// signature could be replayed against another endpoint.
func (s *sigV4) setSignedHeaders(v string) *apiError {
	names := strings.Split(v, ";")
	host := false
	for _, n := range names {
		if n == "" || n != strings.ToLower(n) || strings.ContainsAny(n, " \t") {
			return incomplete("SignedHeaders %q must be lower-case header names separated by ';'.", truncate(v, 80))
		}
		host = host || n == "host"
	}
	if !host {
		return incomplete("SignedHeaders %q must include 'host'.", truncate(v, 80))
	}
	s.signedHeaders = names
	return nil
}

func (s *sigV4) setDate(d string) *apiError {
	t, err := time.Parse(amzDateFormat, d)
	if err != nil {
		return incomplete("X-Amz-Date %q is not of the form yyyymmddThhmmssZ.", truncate(d, 40))
	}
	s.amzDate, s.at = d, t
	return nil
}

// canonicalRequest is SigV4's canonical form of r: method, URI, sorted
// query, the signed headers with trimmed values, their names, and the
// payload hash.
func (s *sigV4) canonicalRequest(r *http.Request, q url.Values, payloadHash string) string {
	var b strings.Builder
	b.WriteString(r.Method)
	b.WriteByte('\n')
	b.WriteString(canonicalURI(r))
	b.WriteByte('\n')
	b.WriteString(canonicalQuery(q, s.presigned))
	b.WriteByte('\n')
	for _, name := range s.signedHeaders {
		b.WriteString(name)
		b.WriteByte(':')
		b.WriteString(headerValue(r, name))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.WriteString(strings.Join(s.signedHeaders, ";"))
	b.WriteByte('\n')
	b.WriteString(payloadHash)
	return b.String()
}

// canonicalURI is the path as sent, URI-encoded once more: every service
// but S3 signs the path encoded twice, so a "%" the client sent is "%25".
func canonicalURI(r *http.Request) string {
	p := r.URL.EscapedPath()
	if p == "" {
		return "/"
	}
	return uriEncode(p, true)
}

// canonicalQuery sorts the parameters by encoded name, then value, each
// URI-encoded; a presigned request's own signature is left out.
func canonicalQuery(q url.Values, presigned bool) string {
	type pair struct{ k, v string }
	pairs := make([]pair, 0, len(q))
	for k, vs := range q {
		if presigned && k == "X-Amz-Signature" {
			continue
		}
		ek := uriEncode(k, false)
		for _, v := range vs {
			pairs = append(pairs, pair{ek, uriEncode(v, false)})
		}
	}
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i].k != pairs[j].k {
			return pairs[i].k < pairs[j].k
		}
		return pairs[i].v < pairs[j].v
	})
	var b strings.Builder
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.k)
		b.WriteByte('=')
		b.WriteString(p.v)
	}
	return b.String()
}

// headerValue is a signed header's canonical value: its values trimmed,
// runs of spaces made one, joined by commas. Go's server keeps Host,
// Content-Length and Transfer-Encoding outside r.Header.
func headerValue(r *http.Request, name string) string {
	var vs []string
	switch name {
	case "host":
		vs = []string{r.Host}
	case "content-length":
		vs = r.Header.Values("Content-Length")
		if len(vs) == 0 && r.ContentLength >= 0 {
			vs = []string{strconv.FormatInt(r.ContentLength, 10)}
		}
	case "transfer-encoding":
		vs = r.TransferEncoding
	default:
		vs = r.Header.Values(name)
	}
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = strings.Join(strings.Fields(v), " ")
	}
	return strings.Join(out, ",")
}

// uriEncode percent-encodes every byte but SigV4's unreserved ones
// (A-Z a-z 0-9 - _ . ~), and '/' when keepSlash; hex digits upper case.
func uriEncode(s string, keepSlash bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9',
			c == '-', c == '_', c == '.', c == '~', keepSlash && c == '/':
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
	}
	return b.String()
}

// stringToSign is what the signature is an HMAC of.
func (s *sigV4) stringToSign(canonical string) string {
	sum := sha256.Sum256([]byte(canonical))
	return sigV4Algorithm + "\n" + s.amzDate + "\n" + s.scope() + "\n" + hex.EncodeToString(sum[:])
}

// signingKey derives the key of one day, region and service from a
// secret: HMAC chained over "AWS4"+secret, date, region, service,
// "aws4_request".
func signingKey(secret, date, region, service string) []byte {
	k := hmacSHA256([]byte("AWS4"+secret), date)
	k = hmacSHA256(k, region)
	k = hmacSHA256(k, service)
	return hmacSHA256(k, sigV4Terminator)
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// signatureMatches computes the signature of canonical under key and
// compares it with the one sent in constant time. A signature that is not
// hex compares as wrong, not as malformed: AWS answers it so.
func (s *sigV4) signatureMatches(key []byte, canonical string) bool {
	sent, err := hex.DecodeString(s.signature)
	if err != nil {
		return false
	}
	want := hmac.New(sha256.New, key)
	want.Write([]byte(s.stringToSign(canonical)))
	return hmac.Equal(want.Sum(nil), sent)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
