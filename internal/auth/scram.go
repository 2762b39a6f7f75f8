package auth

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"hash"

	"gopkg.in/yaml.v3"
)

// Mechanism is a SCRAM hash (RFC 5802, RFC 7677): the salted keys of a
// password are kept per mechanism, because a key derived with SHA-256 is
// useless to a SHA-512 exchange.
type Mechanism string

const (
	SCRAMSHA256 Mechanism = "SCRAM-SHA-256"
	SCRAMSHA512 Mechanism = "SCRAM-SHA-512"
)

// Mechanisms are the SCRAM mechanisms a stored password serves.
var Mechanisms = []Mechanism{SCRAMSHA256, SCRAMSHA512}

// Hash returns the mechanism's hash constructor, or nil for an unknown one.
func (m Mechanism) Hash() func() hash.Hash {
	switch m {
	case SCRAMSHA256:
		return sha256.New
	case SCRAMSHA512:
		return sha512.New
	}
	return nil
}

// DefaultIterations is the PBKDF2 count `sluice user add` uses: Kafka's
// and RFC 7677's minimum is 4096; more makes a stolen file costlier to
// crack and every PLAIN login (which derives the key again) slower.
const DefaultIterations = 8192

// Credential is what the server keeps of a password for one mechanism
// (RFC 5802 §3): the salt and iteration count it hands the client, the
// StoredKey that verifies the client's proof, and the ServerKey that
// signs the server's answer. Neither key lets anyone log in without
// cracking the password first.
type Credential struct {
	Salt       Bytes `yaml:"salt"`
	Iterations int   `yaml:"iterations"`
	StoredKey  Bytes `yaml:"stored_key"`
	ServerKey  Bytes `yaml:"server_key"`
}

// Bytes is binary data written as base64 in the users file.
type Bytes []byte

// MarshalYAML writes standard base64.
func (b Bytes) MarshalYAML() (any, error) { return base64.StdEncoding.EncodeToString(b), nil }

// UnmarshalYAML reads standard base64.
func (b *Bytes) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	d, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return fmt.Errorf("line %d: not base64: %w", n.Line, err)
	}
	*b = d
	return nil
}

// NewCredential derives a fresh credential for password with a random salt.
func NewCredential(m Mechanism, password string, iterations int) (Credential, error) {
	salt := make([]byte, 24)
	if _, err := rand.Read(salt); err != nil {
		return Credential{}, err
	}
	return DeriveCredential(m, password, salt, iterations)
}

// DeriveCredential computes the credential of password for a given salt.
func DeriveCredential(m Mechanism, password string, salt []byte, iterations int) (Credential, error) {
	h := m.Hash()
	if h == nil {
		return Credential{}, fmt.Errorf("unknown SCRAM mechanism %q", m)
	}
	if iterations < 4096 {
		return Credential{}, fmt.Errorf("%s: at least 4096 iterations, got %d", m, iterations)
	}
	salted, err := pbkdf2.Key(h, password, salt, iterations, h().Size())
	if err != nil {
		return Credential{}, err
	}
	clientKey := HMAC(h, salted, []byte("Client Key"))
	return Credential{
		Salt: salt, Iterations: iterations,
		StoredKey: Sum(h, clientKey),
		ServerKey: HMAC(h, salted, []byte("Server Key")),
	}, nil
}

// VerifyPassword reports whether password derives c's StoredKey: how a
// PLAIN login is checked without keeping the password.
func (c Credential) VerifyPassword(m Mechanism, password string) bool {
	d, err := DeriveCredential(m, password, c.Salt, c.Iterations)
	return err == nil && subtle.ConstantTimeCompare(d.StoredKey, c.StoredKey) == 1
}

func (c Credential) validate(m Mechanism) error {
	h := m.Hash()
	switch {
	case len(c.Salt) == 0:
		return fmt.Errorf("%s: salt is empty", m)
	case c.Iterations < 4096:
		return fmt.Errorf("%s: at least 4096 iterations, got %d", m, c.Iterations)
	case len(c.StoredKey) != h().Size() || len(c.ServerKey) != h().Size():
		return fmt.Errorf("%s: stored_key and server_key must be %d bytes", m, h().Size())
	}
	return nil
}

// HMAC is HMAC(key, msg) with hash h, the primitive every SCRAM step uses.
func HMAC(h func() hash.Hash, key, msg []byte) []byte {
	mac := hmac.New(h, key)
	mac.Write(msg)
	return mac.Sum(nil)
}

// Sum is H(b).
func Sum(h func() hash.Hash, b []byte) []byte {
	d := h()
	d.Write(b)
	return d.Sum(nil)
}
