package auth

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// scramClientFinalNonce computes a client's final message (with proof)
// for a server-first message, per RFC 5802 §3, sending nonce.
func scramClientFinalNonce(t testing.TB, m Mechanism, password, gs2, clientFirstBare, serverFirst, nonce string) string {
	t.Helper()
	attrs, err := scramAttrs(serverFirst)
	if err != nil || len(attrs) < 3 {
		t.Fatalf("server-first %q: %v", serverFirst, err)
	}
	salt, _ := base64.StdEncoding.DecodeString(attrs[1].val)
	var iters int
	for _, c := range attrs[2].val {
		iters = iters*10 + int(c-'0')
	}
	cred, err := DeriveCredential(m, password, salt, iters)
	if err != nil {
		t.Fatal(err)
	}
	h := m.Hash()
	withoutProof := "c=" + base64.StdEncoding.EncodeToString([]byte(gs2)) + ",r=" + nonce
	authMessage := []byte(clientFirstBare + "," + serverFirst + "," + withoutProof)
	// ClientKey is not kept by the server; recompute it from the password.
	salted := derive(t, m, password, salt, iters)
	clientKey := HMAC(h, salted, []byte("Client Key"))
	sig := HMAC(h, cred.StoredKey, authMessage)
	proof := make([]byte, len(sig))
	for i := range sig {
		proof[i] = clientKey[i] ^ sig[i]
	}
	return withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)
}

func derive(t testing.TB, m Mechanism, password string, salt []byte, iters int) []byte {
	t.Helper()
	// SaltedPassword = Hi(password, salt, i): HMAC chain, as pbkdf2 with one block.
	h := m.Hash()
	u := HMAC(h, []byte(password), append(append([]byte{}, salt...), 0, 0, 0, 1))
	out := append([]byte{}, u...)
	for range iters - 1 {
		u = HMAC(h, []byte(password), u)
		for i := range out {
			out[i] ^= u[i]
		}
	}
	return out
}

func lookupOf(creds map[string]Credential) func(Mechanism, string) (Credential, bool) {
	return func(_ Mechanism, user string) (Credential, bool) {
		c, ok := creds[user]
		return c, ok
	}
}

// TestSCRAMServerRFC7677 replays the exchange printed in RFC 7677 §3 with
// the RFC's server nonce: the server's messages must be the RFC's, byte
// for byte.
func TestSCRAMServerRFC7677(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	c, err := DeriveCredential(SCRAMSHA256, "pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := NewSCRAMServer(SCRAMSHA256, lookupOf(map[string]Credential{"user": c}))
	s.serverNonce = func() (string, error) { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", nil }
	first, done, err := s.Step([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	if err != nil || done {
		t.Fatalf("first: %v %v", err, done)
	}
	if want := "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"; string(first) != want {
		t.Fatalf("server-first %q, want %q", first, want)
	}
	final, done, err := s.Step([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	if err != nil || !done {
		t.Fatalf("final: %v %v", err, done)
	}
	if want := "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="; string(final) != want {
		t.Fatalf("server-final %q, want %q", final, want)
	}
	if s.User() != "user" {
		t.Fatalf("user %q", s.User())
	}
	if _, _, err := s.Step([]byte("again")); err == nil {
		t.Fatal("a step after the exchange succeeded")
	}
}

// TestSCRAMServer runs whole exchanges: each mechanism, escaped names,
// authzid, and every refusal with the e= code RFC 5802 gives it.
func TestSCRAMServer(t *testing.T) {
	creds := map[Mechanism]map[string]Credential{}
	for _, m := range Mechanisms {
		creds[m] = map[string]Credential{}
		for _, u := range []string{"alice", "a,b=c"} {
			c, err := NewCredential(m, "secret-"+u, 4096)
			if err != nil {
				t.Fatal(err)
			}
			creds[m][u] = c
		}
	}
	type tc struct {
		name      string
		mech      Mechanism
		first     string // gs2 header + bare
		password  string
		mangle    func(final string) string // edits the client-final message
		firstCode string                    // e= code expected at the first message
		// clientFinalNonce, when set, is the nonce the client-final message
		// sends (the proof is computed over it).
		clientFinalNonce func(cnonce, nonce string) string
		finalCode        string // e= code expected at the final message
		user             string
	}
	cases := []tc{
		{name: "sha256", mech: SCRAMSHA256, first: "n,,n=alice,r=abc", password: "secret-alice", user: "alice"},
		{name: "sha512", mech: SCRAMSHA512, first: "n,,n=alice,r=abc", password: "secret-alice", user: "alice"},
		{name: "y flag", mech: SCRAMSHA256, first: "y,,n=alice,r=abc", password: "secret-alice", user: "alice"},
		{name: "authzid same", mech: SCRAMSHA256, first: "n,a=alice,n=alice,r=abc", password: "secret-alice", user: "alice"},
		{name: "escaped name", mech: SCRAMSHA256, first: "n,,n=a=2Cb=3Dc,r=abc", password: "secret-a,b=c", user: "a,b=c"},
		{name: "extension ignored", mech: SCRAMSHA256, first: "n,,n=alice,r=abc,tokenauth=x", password: "secret-alice", user: "alice"},
		{name: "wrong password", mech: SCRAMSHA256, first: "n,,n=alice,r=abc", password: "nope", finalCode: "invalid-proof"},
		{name: "sha512 key for sha256", mech: SCRAMSHA512, first: "n,,n=alice,r=abc", password: "secret-bob", finalCode: "invalid-proof"},
		{name: "unknown user", mech: SCRAMSHA256, first: "n,,n=mallory,r=abc", password: "x", finalCode: "invalid-proof"},
		{name: "librdkafka nonce", mech: SCRAMSHA256, first: "n,,n=alice,r=abc", password: "secret-alice", user: "alice",
			clientFinalNonce: func(cnonce, nonce string) string { return cnonce + nonce }},
		{name: "nonce repeated twice", mech: SCRAMSHA256, first: "n,,n=alice,r=abc", password: "secret-alice",
			clientFinalNonce: func(cnonce, nonce string) string { return cnonce + cnonce + nonce }, finalCode: "invalid-encoding"},
		{name: "wrong nonce", mech: SCRAMSHA256, first: "n,,n=alice,r=abc", password: "secret-alice",
			mangle: func(f string) string { return strings.Replace(f, "r=abc", "r=abd", 1) }, finalCode: "invalid-encoding"},
		{name: "binding differs", mech: SCRAMSHA256, first: "n,,n=alice,r=abc", password: "secret-alice",
			mangle: func(f string) string { return strings.Replace(f, "c=biws", "c=eSws", 1) }, finalCode: "channel-bindings-dont-match"},
		{name: "no proof", mech: SCRAMSHA256, first: "n,,n=alice,r=abc", password: "secret-alice",
			mangle: func(f string) string { f, _, _ = cutLast(f, ",p="); return f }, finalCode: "invalid-encoding"},
		{name: "short proof", mech: SCRAMSHA256, first: "n,,n=alice,r=abc", password: "secret-alice",
			mangle: func(f string) string { f, _, _ = cutLast(f, ",p="); return f + ",p=AAAA" }, finalCode: "invalid-encoding"},
		{name: "plus binding", mech: SCRAMSHA256, first: "p=tls-unique,,n=alice,r=abc", firstCode: "channel-binding-not-supported"},
		{name: "bad gs2", mech: SCRAMSHA256, first: "x,,n=alice,r=abc", firstCode: "invalid-encoding"},
		{name: "no gs2", mech: SCRAMSHA256, first: "n=alice", firstCode: "invalid-encoding"},
		{name: "mandatory ext", mech: SCRAMSHA256, first: "n,,m=x,n=alice,r=abc", firstCode: "extensions-not-supported"},
		{name: "bad escape", mech: SCRAMSHA256, first: "n,,n=a=2Xb,r=abc", firstCode: "invalid-username-encoding"},
		{name: "empty name", mech: SCRAMSHA256, first: "n,,n=,r=abc", firstCode: "invalid-username-encoding"},
		{name: "authzid differs", mech: SCRAMSHA256, first: "n,a=root,n=alice,r=abc", firstCode: "invalid-username-encoding"},
		{name: "no nonce", mech: SCRAMSHA256, first: "n,,n=alice", firstCode: "invalid-encoding"},
		{name: "empty nonce", mech: SCRAMSHA256, first: "n,,n=alice,r=", firstCode: "invalid-encoding"},
		{name: "nonce not printable", mech: SCRAMSHA256, first: "n,,n=alice,r=a\x01b", firstCode: "invalid-encoding"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := NewSCRAMServer(c.mech, lookupOf(creds[c.mech]))
			if err != nil {
				t.Fatal(err)
			}
			serverFirst, done, err := s.Step([]byte(c.first))
			if c.firstCode != "" {
				var se *SCRAMError
				if !errors.As(err, &se) || se.Code != c.firstCode || !errors.Is(err, ErrSCRAM) {
					t.Fatalf("first: err %v, want code %s", err, c.firstCode)
				}
				return
			}
			if err != nil || done {
				t.Fatalf("first: %v %v", err, done)
			}
			gs2, rest, _ := strings.Cut(c.first, ",")
			az, bare, _ := strings.Cut(rest, ",")
			nonce, _, _ := strings.Cut(strings.TrimPrefix(string(serverFirst), "r="), ",")
			if c.clientFinalNonce != nil {
				nonce = c.clientFinalNonce("abc", nonce)
			}
			final := scramClientFinalNonce(t, c.mech, c.password, gs2+","+az+",", bare, string(serverFirst), nonce)
			if c.mangle != nil {
				final = c.mangle(final)
			}
			resp, done, err := s.Step([]byte(final))
			if !done {
				t.Fatal("not done after the final message")
			}
			if c.finalCode != "" {
				var se *SCRAMError
				if !errors.As(err, &se) || se.Code != c.finalCode {
					t.Fatalf("final: err %v, want code %s", err, c.finalCode)
				}
				if string(resp) != "e="+c.finalCode {
					t.Fatalf("server-final %q", resp)
				}
				return
			}
			if err != nil || !strings.HasPrefix(string(resp), "v=") {
				t.Fatalf("final: %q %v", resp, err)
			}
			if s.User() != c.user {
				t.Fatalf("user %q, want %q", s.User(), c.user)
			}
		})
	}
}

// TestSCRAMUnknownUserLooksKnown: an unknown name gets a stable salt and
// the default iteration count, so probing does not tell names apart.
func TestSCRAMUnknownUserLooksKnown(t *testing.T) {
	firstOf := func(user string) string {
		s, _ := NewSCRAMServer(SCRAMSHA256, lookupOf(nil))
		r, _, err := s.Step([]byte("n,,n=" + user + ",r=abc"))
		if err != nil {
			t.Fatal(err)
		}
		attrs, _ := scramAttrs(string(r))
		return attrs[1].val + "," + attrs[2].val
	}
	a1, a2, b := firstOf("ghost"), firstOf("ghost"), firstOf("other")
	if a1 != a2 || a1 == b || !strings.HasSuffix(a1, ",8192") {
		t.Fatalf("decoy salts: %q %q %q", a1, a2, b)
	}
}

// FuzzSCRAMServer feeds arbitrary client-first and client-final messages:
// the server must never panic, and a refusal after the final message must
// be an "e=" message.
func FuzzSCRAMServer(f *testing.F) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	c, _ := DeriveCredential(SCRAMSHA256, "pencil", salt, 4096)
	lookup := lookupOf(map[string]Credential{"user": c})
	f.Add([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"), []byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	f.Add([]byte("y,a=user,n=us=2Cer,r=x,ext=1"), []byte("c=eSxhPXVzZXIs,r=x,p="))
	f.Add([]byte("n,,m=1"), []byte(",p=,p=="))
	f.Add([]byte(""), []byte(""))
	f.Fuzz(func(t *testing.T, first, final []byte) {
		s, _ := NewSCRAMServer(SCRAMSHA256, lookup)
		s.serverNonce = func() (string, error) { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", nil }
		if _, _, err := s.Step(first); err != nil {
			return
		}
		resp, done, err := s.Step(final)
		if !done {
			t.Fatal("not done after the final message")
		}
		if err != nil && !strings.HasPrefix(string(resp), "e=") {
			t.Fatalf("refusal %q is not an e= message", resp)
		}
		if err == nil && s.User() != "user" {
			t.Fatalf("authenticated unknown user %q", s.User())
		}
	})
}
