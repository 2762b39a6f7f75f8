// Package auth owns who a client is and what it may do: the principals of
// one users file (--auth-file, shared by every protocol), the credentials
// each protocol checks against them (SCRAM salted keys for Kafka SASL
// PLAIN and SCRAM, SigV4 access keys for SQS, hashed bearer tokens for the
// native API), and the access rules (ACLs) that say which principal may do
// which operation on which resource.
//
// A *Store is what front-ends hold. A nil *Store means authentication is
// off: every method then answers as if everyone were allowed everything, so
// front-ends call it unconditionally. A Store rereads its file when told to
// (Reload: internal/node calls it every 2 s and on SIGHUP); readers always see one whole
// version of the file, never half of an edit.
//
// Each front-end speaks its own protocol's exchange (SASL frames, SigV4
// canonical requests, Authorization headers) and maps its calls onto
// Operation and Resource; this package holds only what they share. It must
// never import the broker, a front-end or net/http, and never log or return
// a secret: failures are reported through Store.Fail, which counts them and
// logs them rate-limited with the principal and peer, not the credential.
package auth
