package sqs

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"

	"github.com/sluice-mq/sluice/internal/auth"
)

// Authentication (SigV4, sigv4.go) and authorization (the users file's
// rules, through auth.Store) of each request. Both happen before any call
// reaches the broker: authenticate runs on the request as read, and each
// action resolves its queue through queueFor, which refuses before the
// action touches it. With Config.Auth nil both allow everything.

const protocolName = "sqs" // the protocol label of sluice_auth_failures_total and sluice_request_duration_seconds

// actionOps is the operation each action needs on its queue (the queue
// named by QueueUrl, QueueName or SourceArn). It is the one table of the
// mapping, read by queueFor and by AddPermission's ActionName.
// ListQueues is absent: it shows what the caller may describe.
var actionOps = map[string]auth.Operation{
	"SendMessage":                  auth.Produce,
	"SendMessageBatch":             auth.Produce,
	"ReceiveMessage":               auth.Consume,
	"DeleteMessage":                auth.Consume,
	"DeleteMessageBatch":           auth.Consume,
	"ChangeMessageVisibility":      auth.Consume,
	"ChangeMessageVisibilityBatch": auth.Consume,
	"CreateQueue":                  auth.Create,
	"DeleteQueue":                  auth.Delete,
	"PurgeQueue":                   auth.Delete,
	"SetQueueAttributes":           auth.Alter,
	"TagQueue":                     auth.Alter,
	"UntagQueue":                   auth.Alter,
	"AddPermission":                auth.Alter,
	"RemovePermission":             auth.Alter,
	"GetQueueAttributes":           auth.Describe,
	"GetQueueUrl":                  auth.Describe,
	"ListQueueTags":                auth.Describe,
	"ListDeadLetterSourceQueues":   auth.Describe,
	"ListMessageMoveTasks":         auth.Describe,
	"StartMessageMoveTask":         auth.Redrive,
	"CancelMessageMoveTask":        auth.Redrive,
}

// authenticate verifies the request's SigV4 signature against the access
// keys of the users file and sets c.principal to the key's owner. body is
// the whole request body, read once by parse.
func (h *Handler) authenticate(r *http.Request, c *call, body []byte) error {
	store := h.cfg.Auth
	if store == nil {
		return nil
	}
	fail := func(reason string, who auth.Principal, err *apiError) error {
		store.Fail(protocolName, reason, who, r.RemoteAddr, err.kind.code+" "+requestAction(r, body))
		return err
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return fail(auth.ReasonMalformed, auth.Anonymous, newError(errMalformedQuery, "malformed query string: %v", err))
	}
	if !hasSignature(r, q) {
		return fail(auth.ReasonNoCredentials, auth.Anonymous, newError(errMissingAuthToken,
			"The request must contain either a valid (registered) AWS access key ID or X.509 certificate."))
	}
	s, ae := parseSigV4(r, q)
	if ae != nil {
		return fail(auth.ReasonMalformed, auth.Anonymous, ae)
	}
	claimed := auth.Principal(s.keyID)
	if s.service != sigV4Service {
		return fail(auth.ReasonMalformed, claimed, newError(errSignatureMismatch,
			"Credential should be scoped to correct service: '%s'.", sigV4Service))
	}
	if s.scopeDate != s.amzDate[:8] {
		return fail(auth.ReasonMalformed, claimed, newError(errSignatureMismatch,
			"Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '%s' != '%s', from '%s'.",
			s.scopeDate, s.amzDate[:8], s.amzDate))
	}
	user, secret, ok := store.AccessKey(s.keyID)
	if !ok {
		return fail(auth.ReasonUnknownUser, claimed, newError(errInvalidClientToken, "The security token included in the request is invalid."))
	}
	if ae := h.checkTime(s); ae != nil {
		return fail(auth.ReasonExpired, user, ae)
	}
	hashes, ae := payloadHashes(s, body)
	if ae != nil {
		return fail(auth.ReasonBadCredentials, user, ae)
	}
	key := h.keys.get(s, secret)
	for _, ph := range hashes {
		if s.signatureMatches(key, s.canonicalRequest(r, q, ph)) {
			h.keys.put(s, secret, key)
			c.principal, c.keyID = user, s.keyID
			return nil
		}
	}
	return fail(auth.ReasonBadCredentials, user, newError(errSignatureMismatch,
		"The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details."))
}

// checkTime holds a header signature to ±15 minutes of the server's clock,
// and a presigned one from 15 minutes before its X-Amz-Date (clock skew)
// until X-Amz-Date plus X-Amz-Expires.
func (h *Handler) checkTime(s *sigV4) *apiError {
	now := h.cfg.Now().UTC()
	if s.at.After(now.Add(maxClockSkew)) {
		return newError(errRequestExpired, "Signature not yet current: %s is still later than %s (%s + 15 min.)",
			s.amzDate, now.Add(maxClockSkew).Format(amzDateFormat), now.Format(amzDateFormat))
	}
	if s.presigned {
		if now.After(s.at.Add(s.expires)) {
			return newError(errRequestExpired, "Request has expired: it was valid until %s; it is now %s.",
				s.at.Add(s.expires).Format(amzDateFormat), now.Format(amzDateFormat))
		}
		return nil
	}
	if s.at.Before(now.Add(-maxClockSkew)) {
		return newError(errRequestExpired, "Signature expired: %s is now earlier than %s (%s - 15 min.)",
			s.amzDate, now.Add(-maxClockSkew).Format(amzDateFormat), now.Format(amzDateFormat))
	}
	return nil
}

// payloadHashes lists the payload hashes a signature may have been made
// with. A header signature covers the body's SHA-256; an
// X-Amz-Content-Sha256 that says otherwise (UNSIGNED-PAYLOAD included) is
// refused, since the query protocol carries its parameters in the body. A
// presigned URL may be signed with UNSIGNED-PAYLOAD (as SDK presigners do)
// only when the request has no body, or with the body's hash.
func payloadHashes(s *sigV4, body []byte) ([]string, *apiError) {
	sum := sha256.Sum256(body)
	bodyHash := hex.EncodeToString(sum[:])
	switch {
	case s.payloadHash == "" && s.presigned && len(body) == 0:
		return []string{unsignedPayload, bodyHash}, nil
	case s.payloadHash == "", s.payloadHash == bodyHash:
		return []string{bodyHash}, nil
	case s.payloadHash == unsignedPayload && s.presigned && len(body) == 0:
		return []string{unsignedPayload}, nil
	case s.payloadHash == unsignedPayload:
		return nil, newError(errSignatureMismatch, "UNSIGNED-PAYLOAD is accepted only for a presigned request without a body: sign the body's SHA-256.")
	}
	return nil, newError(errSignatureMismatch, "The provided X-Amz-Content-Sha256 does not match what was computed from the request body.")
}

// requestAction names the action for the failure log, before parse has
// decoded it (only refused requests pay for this).
func requestAction(r *http.Request, body []byte) string {
	if t := r.Header.Get("X-Amz-Target"); t != "" {
		return truncate(t, 80)
	}
	if a := r.URL.Query().Get("Action"); a != "" {
		return truncate(a, 80)
	}
	if v, err := url.ParseQuery(string(body)); err == nil && v.Get("Action") != "" {
		return truncate(v.Get("Action"), 80)
	}
	return "(query request)"
}

// queueFor resolves the request's queue (queueName) and checks that the
// caller may do the action's operation (actionOps) on it. The refusal
// comes before the queue is looked up, so it does not tell whether the
// queue exists.
func (h *Handler) queueFor(c *call, queueURL string) (string, error) {
	name, err := c.queueName(queueURL)
	if err != nil {
		return "", err
	}
	c.traceDest(name)
	return name, h.allow(c, c.action, name)
}

// allow checks the operation of action on queue. An action missing from
// actionOps is refused: a new action must be placed in the table.
func (h *Handler) allow(c *call, action, queue string) error {
	op, ok := actionOps[action]
	if !ok {
		op = auth.All
	}
	return h.allowOp(c, op, queue)
}

// allowOp checks op on queue, answering AccessDenied (counted) if no rule
// allows it.
func (h *Handler) allowOp(c *call, op auth.Operation, queue string) error {
	res := auth.Resource{Kind: auth.Queue, Name: queue}
	if topic, _, ok := splitSub(queue); ok {
		res = auth.Resource{Kind: auth.Topic, Name: topic} // a subscription: its topic's rules, as in the native API
	}
	if h.cfg.Auth.Allowed(c.principal, op, res) {
		return nil
	}
	h.cfg.Auth.Fail(protocolName, auth.ReasonDenied, c.principal, c.peer, string(op)+" "+res.String())
	return newError(errAccessDenied, "Access to the resource %s is denied.", h.queueURL(c, queue))
}

// visible keeps the queues the caller may describe (ListQueues,
// ListDeadLetterSourceQueues): what it may not see is left out, not
// refused, as Kafka's Metadata leaves out topics.
func (h *Handler) visible(c *call, names []string) []string {
	if h.cfg.Auth == nil {
		return names
	}
	out := names[:0:0]
	for _, n := range names {
		if h.cfg.Auth.Allowed(c.principal, auth.Describe, auth.Resource{Kind: auth.Queue, Name: n}) {
			out = append(out, n)
		}
	}
	return out
}

// allowDeadLetter checks a redrive policy that names a new dead-letter
// queue: dead letters are produced into it, so the caller needs produce
// there, or a queue of its own could fill another's.
func (h *Handler) allowDeadLetter(c *call, before, after string) error {
	if after == "" || after == before {
		return nil
	}
	return h.allowOp(c, auth.Produce, after)
}

// keyCache keeps the signing keys of recent successful requests: a key
// is derived by four chained HMACs and changes once a day per access key
// and region, so deriving it per request is a third of the verification's
// cost. Only a verified request's key is kept, with the secret it was
// derived from, so a rotated secret is never served from the cache.
type keyCache struct {
	m sync.Map // scope key -> cachedKey
	n atomic.Int64
}

type cachedKey struct {
	secret string
	key    []byte
}

// maxCachedKeys bounds the cache; past it, it starts over.
const maxCachedKeys = 4096

func (k *keyCache) get(s *sigV4, secret string) []byte {
	if v, ok := k.m.Load(s.keyID + "/" + s.scope()); ok && v.(cachedKey).secret == secret {
		return v.(cachedKey).key
	}
	return signingKey(secret, s.scopeDate, s.region, s.service)
}

func (k *keyCache) put(s *sigV4, secret string, key []byte) {
	if _, loaded := k.m.Swap(s.keyID+"/"+s.scope(), cachedKey{secret, key}); !loaded && k.n.Add(1) > maxCachedKeys {
		k.m.Clear()
		k.n.Store(0)
	}
}
