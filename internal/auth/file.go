package auth

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// File is the users file as it is on disk (docs/security.md):
//
//	users:
//	  - name: billing
//	    scram_sha_256: {salt: ..., iterations: 8192, stored_key: ..., server_key: ...}
//	    scram_sha_512: {...}
//	    access_keys: [{id: AKIA..., secret: ...}]
//	    tokens: ["sha256:..."]
//	acls:
//	  - {user: billing, allow: [produce, consume], resources: ["topic:orders", "queue:emails*"]}
//
// A hand-written file may give `password:` in clear and tokens unhashed;
// they work, the loader warns, and the next `sluice user` edit stores them
// salted and hashed.
type File struct {
	Users []User `yaml:"users"`
	ACLs  []Rule `yaml:"acls"`
}

// User is one principal and its credentials.
type User struct {
	Name string `yaml:"name"`
	// Password in clear text, as a person may write it; sluice never
	// writes it (Harden replaces it with the SCRAM credentials).
	Password    string      `yaml:"password,omitempty"`
	SCRAMSHA256 *Credential `yaml:"scram_sha_256,omitempty"`
	SCRAMSHA512 *Credential `yaml:"scram_sha_512,omitempty"`
	// AccessKeys sign SQS requests. SigV4 is an HMAC keyed by the secret,
	// so the server must keep the secret itself: the file is 0600.
	AccessKeys []AccessKey `yaml:"access_keys,omitempty"`
	// Tokens are native-API bearer tokens, stored as "sha256:<hex>".
	Tokens []string `yaml:"tokens,omitempty"`
}

// AccessKey is an SQS access key pair.
type AccessKey struct {
	ID     string `yaml:"id"`
	Secret string `yaml:"secret"`
}

// Credential returns the user's stored credential for mechanism m.
func (u *User) Credential(m Mechanism) *Credential {
	switch m {
	case SCRAMSHA256:
		return u.SCRAMSHA256
	case SCRAMSHA512:
		return u.SCRAMSHA512
	}
	return nil
}

// SetPassword stores password's SCRAM credentials for every mechanism and
// drops any clear-text password.
func (u *User) SetPassword(password string, iterations int) error {
	if password == "" {
		return errors.New("password is empty")
	}
	for _, m := range Mechanisms {
		c, err := NewCredential(m, password, iterations)
		if err != nil {
			return err
		}
		switch m {
		case SCRAMSHA256:
			u.SCRAMSHA256 = &c
		case SCRAMSHA512:
			u.SCRAMSHA512 = &c
		}
	}
	u.Password = ""
	return nil
}

// HashToken is how a bearer token is stored: "sha256:" and the hex digest.
// A token is a long random string, so an unsalted hash suffices (as for
// API keys); the file then never holds one that works.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// NewToken returns a fresh random bearer token (shown once, stored hashed).
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "sl_" + base64.RawURLEncoding.EncodeToString(b), nil
}

func isHashedToken(t string) bool {
	h, ok := strings.CutPrefix(t, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}

// Parse reads a users file strictly: an unknown key is an error (a typo in
// a security file must not silently grant or drop anything).
func Parse(data []byte) (*File, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) { // empty: no users, no rules
		return nil, fmt.Errorf("users file: %w", err)
	}
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("users file: %w", err)
	}
	for i := range f.ACLs {
		f.ACLs[i].normalize()
	}
	return &f, nil
}

// Validate checks names, credentials and rules, and that no access key id
// or user name appears twice.
func (f *File) Validate() error {
	names := map[string]bool{}
	keys := map[string]bool{}
	for _, u := range f.Users {
		if u.Name == "" || strings.ContainsAny(u.Name, "*\n") || u.Name != strings.TrimSpace(u.Name) {
			return fmt.Errorf("user %q: a name is required, without '*' or surrounding spaces", u.Name)
		}
		if names[u.Name] {
			return fmt.Errorf("user %q appears twice", u.Name)
		}
		names[u.Name] = true
		for _, m := range Mechanisms {
			if c := u.Credential(m); c != nil {
				if err := c.validate(m); err != nil {
					return fmt.Errorf("user %q: %w", u.Name, err)
				}
			}
		}
		for _, k := range u.AccessKeys {
			if k.ID == "" || k.Secret == "" {
				return fmt.Errorf("user %q: an access key needs an id and a secret", u.Name)
			}
			if keys[k.ID] {
				return fmt.Errorf("access key %q appears twice", k.ID)
			}
			keys[k.ID] = true
		}
		for _, t := range u.Tokens {
			if t == "" {
				return fmt.Errorf("user %q: empty token", u.Name)
			}
		}
	}
	for _, r := range f.ACLs {
		if err := r.validate(); err != nil {
			return err
		}
	}
	return nil
}

// Warnings lists what a hand-written file keeps in clear text.
func (f *File) Warnings() []string {
	var w []string
	for _, u := range f.Users {
		if u.Password != "" {
			w = append(w, fmt.Sprintf("user %q has a clear-text password; `sluice user passwd` stores it salted", u.Name))
		}
		for _, t := range u.Tokens {
			if !isHashedToken(t) {
				w = append(w, fmt.Sprintf("user %q has a clear-text token; `sluice user` edits store it hashed", u.Name))
				break
			}
		}
	}
	return w
}

// Harden replaces clear-text passwords with SCRAM credentials and clear
// tokens with their hashes: what every edit through the CLI does before
// writing.
func (f *File) Harden(iterations int) error {
	for i := range f.Users {
		u := &f.Users[i]
		if u.Password != "" {
			if err := u.SetPassword(u.Password, iterations); err != nil {
				return fmt.Errorf("user %q: %w", u.Name, err)
			}
		}
		for j, t := range u.Tokens {
			if !isHashedToken(t) {
				u.Tokens[j] = HashToken(t)
			}
		}
	}
	return nil
}

// User returns the named user, or nil.
func (f *File) User(name string) *User {
	i := slices.IndexFunc(f.Users, func(u User) bool { return u.Name == name })
	if i < 0 {
		return nil
	}
	return &f.Users[i]
}

// Marshal encodes f as YAML.
func (f *File) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(f); err != nil {
		return nil, err
	}
	return buf.Bytes(), enc.Close()
}

// ReadFile parses the users file at path.
func ReadFile(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data)
}

// WriteFile replaces the users file at path atomically with mode 0600: a
// reader (the running server) sees the old file or the new one, never a
// mix, and a crash leaves one of them.
func WriteFile(path string, f *File) error {
	if err := f.Validate(); err != nil {
		return err
	}
	data, err := f.Marshal()
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
