package auth

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const handWritten = `
users:
  - name: billing
    password: pw1
    access_keys: [{id: AKIDBILLING, secret: sk1}]
    tokens: ["tok-billing"]
  - name: admin
    password: pw2
acls:
  - {user: billing, allow: [produce], resources: ["topic:orders"]}
  - {user: admin, allow: [all], resources: ["*"]}
`

func writeUsers(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestStoreAuthenticates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.yaml")
	writeUsers(t, path, handWritten)
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := s.Password("billing", "pw1"); !ok || p != "billing" {
		t.Errorf("Password(billing, pw1) = %q, %v", p, ok)
	}
	for _, c := range [][2]string{{"billing", "pw2"}, {"nobody", "pw1"}, {"billing", ""}, {"", ""}} {
		if _, ok := s.Password(c[0], c[1]); ok {
			t.Errorf("Password(%q, %q) accepted", c[0], c[1])
		}
	}
	if _, ok := s.SCRAM(SCRAMSHA512, "admin"); !ok {
		t.Error("no SCRAM-SHA-512 credential derived for a clear-text password")
	}
	if user, secret, ok := s.AccessKey("AKIDBILLING"); !ok || user != "billing" || secret != "sk1" {
		t.Errorf("AccessKey = %q %q %v", user, secret, ok)
	}
	if _, _, ok := s.AccessKey("AKIDNONE"); ok {
		t.Error("unknown access key found")
	}
	if p, ok := s.Token("tok-billing"); !ok || p != "billing" {
		t.Errorf("Token = %q, %v", p, ok)
	}
	if _, ok := s.Token(""); ok {
		t.Error("empty token accepted")
	}
	if !s.Allowed("billing", Produce, Resource{Topic, "orders"}) || s.Allowed("billing", Consume, Resource{Topic, "orders"}) {
		t.Error("rules not applied")
	}
	if s.Allowed(Anonymous, Describe, Resource{Kind: Cluster}) {
		t.Error("anonymous allowed with authentication on")
	}
}

func TestNilStoreAllowsEverything(t *testing.T) {
	var s *Store
	if s.Enabled() || !s.Allowed(Anonymous, Delete, Resource{Topic, "x"}) {
		t.Error("a nil store must allow everything")
	}
	if _, ok := s.Token(""); !ok {
		t.Error("a nil store must accept a request without a token")
	}
	s.Fail("kafka", ReasonDenied, "", "", "") // must not panic
}

// TestReloadKeepsTheOldVersionOnError: a broken edit must neither lock
// everyone out nor let everyone in.
func TestReloadKeepsTheOldVersionOnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.yaml")
	writeUsers(t, path, handWritten)
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, broken := range []string{"users: [", "users:\n  - name: x\n    pasword: typo\n", "acls:\n  - {user: x, allow: [fly], resources: ['*']}\n"} {
		writeUsers(t, path, broken)
		if err := s.Reload(); err == nil {
			t.Fatalf("Reload accepted %q", broken)
		}
		if _, ok := s.Password("billing", "pw1"); !ok {
			t.Fatalf("after a failed reload of %q the old users are gone", broken)
		}
	}
	writeUsers(t, path, "users:\n  - {name: carol, password: pw3}\n")
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Password("billing", "pw1"); ok {
		t.Error("a removed user still logs in after reload")
	}
	if _, ok := s.Password("carol", "pw3"); !ok {
		t.Error("an added user cannot log in after reload")
	}
}

func TestWriteFileHardensAndIs0600(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.yaml")
	f, err := Parse([]byte(handWritten))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Warnings()) != 3 {
		t.Errorf("warnings %q, want two clear passwords and one clear token", f.Warnings())
	}
	if err := f.Harden(4096); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, f); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	raw, _ := os.ReadFile(path)
	for _, secret := range []string{"pw1", "pw2", "tok-billing"} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("written file holds %q in clear:\n%s", secret, raw)
		}
	}
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Password("admin", "pw2"); !ok {
		t.Error("hardened password does not verify")
	}
	if _, ok := s.Token("tok-billing"); !ok {
		t.Error("hashed token does not verify")
	}
	if g, _ := Parse(raw); len(g.Warnings()) != 0 {
		t.Errorf("hardened file still warns: %q", g.Warnings())
	}
}

func TestFailIsRateLimited(t *testing.T) {
	now := time.Unix(1000, 0)
	var counted int
	var logged strings.Builder
	s, err := NewStatic(&File{}, Options{
		Logger:    slog.New(slog.NewTextHandler(&logged, nil)),
		OnFailure: func(string, string) { counted++ },
		Now:       func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		s.Fail("kafka", ReasonBadCredentials, "mallory", "10.0.0.9:5555", "SCRAM-SHA-256")
	}
	now = now.Add(failureLogEvery)
	s.Fail("kafka", ReasonBadCredentials, "mallory", "10.0.0.9:5555", "SCRAM-SHA-256")
	if counted != 101 {
		t.Errorf("counted %d, want every failure (101)", counted)
	}
	lines := strings.Split(strings.TrimSpace(logged.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "suppressed=99") {
		t.Errorf("log lines:\n%s", logged.String())
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(handWritten))
	f.Add([]byte("users:\n  - name: x\n    scram_sha_256: {salt: AAAA, iterations: 4096, stored_key: AAAA, server_key: AAAA}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			return
		}
		// Whatever parses must survive a round trip through Marshal.
		out, err := file.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(out); err != nil {
			t.Fatalf("re-parse of marshalled file: %v\n%s", err, out)
		}
	})
}

// TestWarnsOfAFileOpenToOthers: an auth file other users may read is loaded with a
// warning to chmod it; one only its owner reads is not.
func TestWarnsOfAFileOpenToOthers(t *testing.T) {
	for _, tc := range []struct {
		mode os.FileMode
		warn bool
	}{{0o600, false}, {0o640, true}, {0o644, true}, {0o400, false}} {
		path := filepath.Join(t.TempDir(), "users.yaml")
		writeUsers(t, path, handWritten)
		if err := os.Chmod(path, tc.mode); err != nil {
			t.Fatal(err)
		}
		var logs strings.Builder
		if _, err := Open(path, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(logs.String(), "auth file is open to other users"); got != tc.warn {
			t.Errorf("mode %#o: warned %v, want %v:\n%s", tc.mode, got, tc.warn, logs.String())
		}
	}
}
