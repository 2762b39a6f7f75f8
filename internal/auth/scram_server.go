package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// SCRAMServer is the server side of one SCRAM exchange (RFC 5802, with the
// SHA-256 and SHA-512 hashes of RFC 7677): client-first, server-first,
// client-final, server-final. It speaks only the SASL messages; a
// front-end carries them in its own frames (Kafka's SaslAuthenticate).
//
// Channel binding is not offered: the client's gs2 header must be "n,," or
// "y,," (a client that could bind but thinks the server cannot); "p=" (the
// -PLUS mechanisms) is refused. An unknown user is not refused at the first
// message, which would tell a prober which names exist: the exchange runs
// on with a salt derived from the name and fails at the proof, like a wrong
// password.
type SCRAMServer struct {
	mech   Mechanism
	lookup func(Mechanism, string) (Credential, bool)
	step   int

	user            string
	cred            Credential
	known           bool
	gs2Header       string
	nonce           string // client nonce + server nonce
	clientNonce     string
	clientFirstBare string
	serverFirst     string

	// serverNonce makes the server's half of the nonce (tests replace it
	// to replay the RFC's example exchange).
	serverNonce func() (string, error)
}

// ErrSCRAM is wrapped by every failed exchange; the SCRAMError says which.
var ErrSCRAM = errors.New("scram authentication failed")

// SCRAMError is a failed exchange: Code is the RFC 5802 server-error value
// ("invalid-proof", "invalid-encoding", …) the server-final message
// carries as "e=Code"; Reason is for the log and the client's error text.
type SCRAMError struct {
	Code, Reason string
}

func (e *SCRAMError) Error() string { return fmt.Sprintf("scram: %s: %s", e.Code, e.Reason) }

func (e *SCRAMError) Unwrap() error { return ErrSCRAM }

// Malformed reports whether the client's message did not parse (as opposed
// to a wrong password).
func (e *SCRAMError) Malformed() bool { return e.Code != "invalid-proof" }

func scramErr(code, format string, args ...any) *SCRAMError {
	return &SCRAMError{Code: code, Reason: fmt.Sprintf(format, args...)}
}

// NewSCRAMServer starts an exchange for mechanism m; lookup returns a
// user's stored credential (Store.SCRAM).
func NewSCRAMServer(m Mechanism, lookup func(Mechanism, string) (Credential, bool)) (*SCRAMServer, error) {
	if m.Hash() == nil {
		return nil, fmt.Errorf("unknown SCRAM mechanism %q", m)
	}
	return &SCRAMServer{mech: m, lookup: lookup, serverNonce: randomNonce}, nil
}

func randomNonce() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawStdEncoding.EncodeToString(b), nil
}

// User is the user name the client gave (valid after the first Step).
func (s *SCRAMServer) User() string { return s.user }

// Step takes the client's next message and returns the server's answer.
// done is true once the server-final message is returned. On a failure the
// error is a *SCRAMError and, after the client-final message, resp is the
// "e=…" server-final message to send before closing.
func (s *SCRAMServer) Step(msg []byte) (resp []byte, done bool, err error) {
	switch s.step {
	case 0:
		s.step = 1
		r, err := s.clientFirst(string(msg))
		if err != nil {
			s.step = 3
			return nil, false, err
		}
		return []byte(r), false, nil
	case 1:
		s.step = 3
		r, err := s.clientFinal(string(msg))
		if err != nil {
			var se *SCRAMError
			errors.As(err, &se)
			return []byte("e=" + se.Code), true, err
		}
		return []byte(r), true, nil
	}
	return nil, true, scramErr("other-error", "the exchange is over")
}

// clientFirst reads "gs2-header client-first-bare" and answers
// "r=nonce,s=salt,i=iterations".
func (s *SCRAMServer) clientFirst(msg string) (string, error) {
	cbind, rest, ok := strings.Cut(msg, ",")
	if !ok {
		return "", scramErr("invalid-encoding", "client-first message has no gs2 header")
	}
	switch {
	case cbind == "n" || cbind == "y":
	case strings.HasPrefix(cbind, "p="):
		return "", scramErr("channel-binding-not-supported", "channel binding (-PLUS) is not offered")
	default:
		return "", scramErr("invalid-encoding", "gs2 header: want n or y, got %q", cbind)
	}
	authzid, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return "", scramErr("invalid-encoding", "client-first message has no authzid field")
	}
	s.gs2Header = cbind + "," + authzid + ","
	s.clientFirstBare = bare
	attrs, err := scramAttrs(bare)
	if err != nil {
		return "", err
	}
	if attrs[0].key == "m" {
		return "", scramErr("extensions-not-supported", "mandatory extension m=")
	}
	if len(attrs) < 2 || attrs[0].key != "n" || attrs[1].key != "r" || attrs[1].val == "" {
		return "", scramErr("invalid-encoding", "client-first-bare: want n=user,r=nonce")
	}
	user, err := decodeSASLName(attrs[0].val)
	if err != nil {
		return "", err
	}
	if authzid != "" {
		az, err := decodeSASLName(strings.TrimPrefix(authzid, "a="))
		if err != nil || !strings.HasPrefix(authzid, "a=") {
			return "", scramErr("invalid-encoding", "authzid %q", authzid)
		}
		if az != user {
			return "", scramErr("invalid-username-encoding", "authorization id differs from the user name")
		}
	}
	if !printable(attrs[1].val) {
		return "", scramErr("invalid-encoding", "client nonce has a non-printable character or a comma")
	}
	s.user = user
	s.cred, s.known = s.lookup(s.mech, user)
	if !s.known {
		s.cred = decoyCredential(s.mech, user)
	}
	snonce, err := s.serverNonce()
	if err != nil {
		return "", scramErr("other-error", "random nonce: %v", err)
	}
	s.clientNonce = attrs[1].val
	s.nonce = attrs[1].val + snonce
	s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(s.cred.Salt) +
		",i=" + strconv.Itoa(s.cred.Iterations)
	return s.serverFirst, nil
}

// clientFinal reads "c=binding,r=nonce,...,p=proof", checks the proof
// against StoredKey and answers "v=server-signature".
func (s *SCRAMServer) clientFinal(msg string) (string, error) {
	withoutProof, proofAttr, ok := cutLast(msg, ",p=")
	if !ok {
		return "", scramErr("invalid-encoding", "client-final message has no proof")
	}
	attrs, err := scramAttrs(withoutProof)
	if err != nil {
		return "", err
	}
	if len(attrs) < 2 || attrs[0].key != "c" || attrs[1].key != "r" {
		return "", scramErr("invalid-encoding", "client-final: want c=binding,r=nonce")
	}
	cb, err := base64.StdEncoding.DecodeString(attrs[0].val)
	if err != nil || string(cb) != s.gs2Header {
		return "", scramErr("channel-bindings-dont-match", "c= is not the gs2 header of the first message")
	}
	// librdkafka 2.0 (Debian's kcat and confluent-kafka) sends its own
	// nonce before the combined one; Kafka's broker has long accepted any
	// nonce ending with the combined one, so clients built on it work.
	// Only that one repetition is accepted.
	if n := attrs[1].val; n != s.nonce && n != s.clientNonce+s.nonce {
		return "", scramErr("invalid-encoding", "nonce differs from the server's")
	}
	proof, err := base64.StdEncoding.DecodeString(proofAttr)
	h := s.mech.Hash()
	if err != nil || len(proof) != h().Size() {
		return "", scramErr("invalid-encoding", "proof is not %d base64 bytes", h().Size())
	}
	authMessage := []byte(s.clientFirstBare + "," + s.serverFirst + "," + withoutProof)
	clientSig := HMAC(h, s.cred.StoredKey, authMessage)
	clientKey := make([]byte, len(proof))
	for i := range proof {
		clientKey[i] = proof[i] ^ clientSig[i]
	}
	if subtle.ConstantTimeCompare(Sum(h, clientKey), s.cred.StoredKey) != 1 || !s.known {
		return "", scramErr("invalid-proof", "wrong password or unknown user %q", s.user)
	}
	return "v=" + base64.StdEncoding.EncodeToString(HMAC(h, s.cred.ServerKey, authMessage)), nil
}

type scramAttr struct {
	key, val string
}

// scramAttrs splits "k=v,k=v" (RFC 5802 §5.1: a letter, '=', a value
// without commas). Keys of more letters are allowed for the extensions
// Kafka's clients append ("tokenauth=true"), which are ignored.
func scramAttrs(s string) ([]scramAttr, error) {
	var out []scramAttr
	for part := range strings.SplitSeq(s, ",") {
		key, val, ok := strings.Cut(part, "=")
		if !ok || key == "" || !alpha(key) {
			return nil, scramErr("invalid-encoding", "attribute %q is not k=value", part)
		}
		out = append(out, scramAttr{key, val})
	}
	return out, nil
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// decodeSASLName undoes RFC 5802's escaping of ',' and '=' ("=2C", "=3D");
// any other '=' is an error.
func decodeSASLName(s string) (string, error) {
	if !strings.Contains(s, "=") {
		if s == "" {
			return "", scramErr("invalid-username-encoding", "empty user name")
		}
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", scramErr("invalid-username-encoding", "bad escape in user name")
		}
		i += 2
	}
	return b.String(), nil
}

func alpha(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i] | 0x20; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// printable is RFC 5802's nonce alphabet: printable ASCII without ','.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e || s[i] == ',' {
			return false
		}
	}
	return true
}

// decoySecret keys the salts of unknown users: stable for the process, so
// a prober asking twice for the same name gets the same salt, as for a
// real user, and unpredictable, so the salt does not reveal it is a decoy.
var decoySecret = func() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return b
}()

// decoyCredential is what an unknown user's exchange runs on: a salt
// derived from the name, the default iteration count, and keys that no
// proof matches (the exchange fails at the proof anyway, see clientFinal).
func decoyCredential(m Mechanism, user string) Credential {
	h := m.Hash()
	salt := HMAC(h, decoySecret, []byte("salt:"+user))[:24]
	key := HMAC(h, decoySecret, []byte("key:"+user))
	return Credential{Salt: salt, Iterations: DefaultIterations, StoredKey: key, ServerKey: key}
}
