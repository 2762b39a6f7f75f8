package auth

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Principal is an authenticated identity: a user of the file, or the
// Common Name of a verified client certificate. The zero Principal is
// anonymous.
type Principal string

// Anonymous is the principal of a client that presented no credentials.
const Anonymous Principal = ""

// Options configure a Store.
type Options struct {
	Logger *slog.Logger
	// OnFailure counts an authentication failure or authorization denial
	// (sluice_auth_failures_total{protocol,reason}).
	OnFailure func(protocol, reason string)
	// Now is the clock of the failure log's rate limit (tests inject it).
	Now func() time.Time
}

// Store answers authentication and authorization questions from the
// current version of the users file. Its methods are safe for concurrent
// use and nil-safe: a nil *Store allows everything (authentication off).
type Store struct {
	path string
	opts Options
	cur  atomic.Pointer[version]

	mu      sync.Mutex // guards the failure log's rate limit
	logged  map[string]time.Time
	dropped map[string]int
}

// version is one loaded file, indexed for the lookups every request makes.
type version struct {
	raw    []byte // the file's bytes, to tell a real change from a touch
	users  map[string]*User
	keys   map[string]accessKeyOwner
	tokens map[[sha256.Size]byte]string // sha256(token) -> user
	rules  []Rule
}

type accessKeyOwner struct{ user, secret string }

// Open loads the users file at path. Call Reload to pick up
// edits.
func Open(path string, opts Options) (*Store, error) {
	s := newStore(path, opts)
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// NewStatic returns a Store over f that never reloads (tests, embedding).
func NewStatic(f *File, opts Options) (*Store, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	s := newStore("", opts)
	v, err := index(f, nil)
	if err != nil {
		return nil, err
	}
	s.cur.Store(v)
	return s, nil
}

func newStore(path string, opts Options) *Store {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Store{path: path, opts: opts, logged: map[string]time.Time{}, dropped: map[string]int{}}
}

// Reload rereads the file. On any error the previous version stays in
// force (a half-saved or mistyped edit never locks everyone out or lets
// everyone in) and the error says why.
func (s *Store) Reload() error {
	if s == nil || s.path == "" {
		return nil
	}
	raw, err := os.ReadFile(s.path)
	if err != nil {
		return fmt.Errorf("--auth-file: %w", err)
	}
	if old := s.cur.Load(); old != nil && bytes.Equal(old.raw, raw) {
		return nil
	}
	f, err := Parse(raw)
	if err != nil {
		return fmt.Errorf("--auth-file %s: %w", s.path, err)
	}
	for _, w := range f.Warnings() {
		s.opts.Logger.Warn("auth file keeps a secret in clear text", "file", s.path, "detail", w)
	}
	// SQS secrets are in clear and the rest are hashes worth guessing against: the file
	// is for the broker's user alone, as `sluice user` writes it (0600).
	if st, err := os.Stat(s.path); err == nil && st.Mode().Perm()&0o077 != 0 {
		s.opts.Logger.Warn("auth file is open to other users: chmod 600 it", "file", s.path,
			"mode", fmt.Sprintf("%#o", st.Mode().Perm()))
	}
	v, err := index(f, raw)
	if err != nil {
		return fmt.Errorf("--auth-file %s: %w", s.path, err)
	}
	old := s.cur.Swap(v)
	if old != nil {
		s.opts.Logger.Info("auth file reloaded", "file", s.path, "users", len(v.users), "acls", len(v.rules))
	}
	return nil
}

func index(f *File, raw []byte) (*version, error) {
	f = cloneFile(f)
	// A hand-written clear password is derived once here, not per login.
	if err := f.Harden(DefaultIterations); err != nil {
		return nil, err
	}
	v := &version{raw: raw, users: map[string]*User{}, keys: map[string]accessKeyOwner{},
		tokens: map[[sha256.Size]byte]string{}, rules: f.ACLs}
	for i := range f.Users {
		u := &f.Users[i]
		v.users[u.Name] = u
		for _, k := range u.AccessKeys {
			v.keys[k.ID] = accessKeyOwner{u.Name, k.Secret}
		}
		for _, t := range u.Tokens {
			var h [sha256.Size]byte
			if _, err := hex.Decode(h[:], []byte(strings.TrimPrefix(t, "sha256:"))); err != nil {
				return nil, fmt.Errorf("user %q: token hash: %w", u.Name, err)
			}
			v.tokens[h] = u.Name
		}
	}
	return v, nil
}

// cloneFile copies what Harden rewrites, so a caller's File is not changed.
func cloneFile(f *File) *File {
	c := &File{Users: make([]User, len(f.Users)), ACLs: f.ACLs}
	for i, u := range f.Users {
		u.Tokens = append([]string(nil), u.Tokens...)
		c.Users[i] = u
	}
	return c
}

// Enabled reports whether requests must authenticate.
func (s *Store) Enabled() bool { return s != nil }

// Password checks a user name and password (Kafka SASL PLAIN) against the
// stored SCRAM-SHA-256 credential. An unknown user costs the same
// derivation as a known one, so timing does not tell which names exist.
func (s *Store) Password(user, password string) (Principal, bool) {
	if s == nil {
		return Principal(user), true
	}
	u := s.cur.Load().users[user]
	var c *Credential
	if u != nil {
		c = u.Credential(SCRAMSHA256)
	}
	if c == nil {
		decoy.VerifyPassword(SCRAMSHA256, password)
		return Anonymous, false
	}
	if !c.VerifyPassword(SCRAMSHA256, password) {
		return Anonymous, false
	}
	return Principal(user), true
}

// decoy is verified against for unknown users (see Password).
var decoy = func() Credential {
	c, _ := DeriveCredential(SCRAMSHA256, "decoy", []byte("sluice-decoy-salt"), DefaultIterations)
	return c
}()

// SCRAM returns user's stored credential for mechanism m (Kafka SASL
// SCRAM), or false if the user or its credential does not exist.
func (s *Store) SCRAM(m Mechanism, user string) (Credential, bool) {
	if s == nil {
		return Credential{}, false
	}
	u := s.cur.Load().users[user]
	if u == nil || u.Credential(m) == nil {
		return Credential{}, false
	}
	return *u.Credential(m), true
}

// AccessKey returns the owner and secret of an SQS access key id. The
// caller verifies the signature with hmac.Equal.
func (s *Store) AccessKey(id string) (user Principal, secret string, ok bool) {
	if s == nil {
		return Anonymous, "", false
	}
	k, ok := s.cur.Load().keys[id]
	return Principal(k.user), k.secret, ok
}

// Token returns the user a native-API bearer token belongs to. Tokens are
// looked up by their SHA-256, so the comparison never runs over the token
// itself.
func (s *Store) Token(token string) (Principal, bool) {
	if s == nil {
		return Anonymous, true
	}
	if token == "" {
		return Anonymous, false
	}
	user, ok := s.cur.Load().tokens[sha256.Sum256([]byte(token))]
	return Principal(user), ok
}

// Allowed reports whether p may do op on r. With authentication off
// everything is allowed; an anonymous principal is allowed nothing.
func (s *Store) Allowed(p Principal, op Operation, r Resource) bool {
	if s == nil {
		return true
	}
	if p == Anonymous {
		return false
	}
	return decide(s.cur.Load().rules, string(p), op, r)
}

// Rules returns the access rules in force (Kafka DescribeAcls shows them).
func (s *Store) Rules() []Rule {
	if s == nil {
		return nil
	}
	return s.cur.Load().rules
}

// Path is the users file the store reads ("" for a static store).
func (s *Store) Path() string {
	if s == nil {
		return ""
	}
	return s.path
}

// AllowedSome reports whether p may do op on at least one resource of
// kind (see decideSome): Kafka's InitProducerId admits an idempotent
// producer that may write to any topic.
func (s *Store) AllowedSome(p Principal, op Operation, kind Kind) bool {
	if s == nil {
		return true
	}
	if p == Anonymous {
		return false
	}
	return decideSome(s.cur.Load().rules, string(p), op, kind)
}

// UserSummary is what may be shown of one user: its name and which kinds of
// credentials it has, never a secret, a hash or a token.
type UserSummary struct {
	Name         string   `json:"name"`
	Password     string   `json:"password"` // "scram", "clear text" or "none"
	Tokens       int      `json:"tokens"`
	AccessKeyIDs []string `json:"access_key_ids"` // the ids only (an id is not a secret: SigV4 sends it in clear)
}

// Users summarizes the users in force, sorted by name (the console's users
// page and `sluice admin users`).
func (s *Store) Users() []UserSummary {
	if s == nil {
		return nil
	}
	v := s.cur.Load()
	out := make([]UserSummary, 0, len(v.users))
	for _, u := range v.users {
		sum := UserSummary{Name: u.Name, Password: "none", Tokens: len(u.Tokens), AccessKeyIDs: []string{}}
		switch {
		case u.Password != "":
			sum.Password = "clear text"
		case u.SCRAMSHA256 != nil || u.SCRAMSHA512 != nil:
			sum.Password = "scram"
		}
		for _, k := range u.AccessKeys {
			sum.AccessKeyIDs = append(sum.AccessKeyIDs, k.ID)
		}
		out = append(out, sum)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
