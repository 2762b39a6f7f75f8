package auth

import "time"

// Reasons name why a request was refused, as the auth-failure metric's
// reason label.
const (
	ReasonNoCredentials  = "no_credentials"  // none were presented
	ReasonBadCredentials = "bad_credentials" // wrong password, signature or token
	ReasonUnknownUser    = "unknown_user"    // user or access key id not in the file
	ReasonMalformed      = "malformed"       // an exchange that did not parse
	ReasonExpired        = "expired"         // a signature outside its time window
	ReasonDenied         = "denied"          // authenticated, but no rule allows it
)

// failureLogEvery bounds the failure log: one line per protocol and reason
// per interval, the next line saying how many were not logged. A client
// hammering a wrong password must not fill the disk with logs.
const failureLogEvery = 10 * time.Second

// Fail records a refused request: counted every time, logged rate-limited,
// with the principal (or claimed user name) and the peer address, never
// the credential. detail says what was attempted ("produce topic:orders").
func (s *Store) Fail(protocol, reason string, who Principal, peer, detail string) {
	if s == nil {
		return
	}
	if s.opts.OnFailure != nil {
		s.opts.OnFailure(protocol, reason)
	}
	key := protocol + "/" + reason
	now := s.opts.Now()
	s.mu.Lock()
	if last, ok := s.logged[key]; ok && now.Sub(last) < failureLogEvery {
		s.dropped[key]++
		s.mu.Unlock()
		return
	}
	suppressed := s.dropped[key]
	s.logged[key] = now
	s.dropped[key] = 0
	s.mu.Unlock()
	s.opts.Logger.Warn("request refused", "protocol", protocol, "reason", reason,
		"principal", string(who), "peer", peer, "detail", detail, "suppressed", suppressed)
}
