package kafka

import (
	"errors"
	"io"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
)

// FuzzSASL runs a SaslHandshake for one of the mechanisms (v0 or v1),
// then two arbitrary client messages: raw size-prefixed tokens after v0,
// SaslAuthenticate request bodies (decoded at v0-2) after v1. The
// server must never panic, and a connection may end up authenticated only
// as the one user there is.
func FuzzSASL(f *testing.F) {
	cred, err := auth.DeriveCredential(auth.SCRAMSHA256, "pw", []byte("salt-of-alice"), 4096)
	if err != nil {
		f.Fatal(err)
	}
	cred512, _ := auth.DeriveCredential(auth.SCRAMSHA512, "pw", []byte("salt-of-alice"), 4096)
	st, err := auth.NewStatic(&auth.File{Users: []auth.User{{Name: "alice", SCRAMSHA256: &cred, SCRAMSHA512: &cred512}}}, auth.Options{})
	if err != nil {
		f.Fatal(err)
	}
	srv := New(nil, Config{Logger: quietLogger(), Auth: st, FailedAuthDelay: -1})
	authBody := func(version int16, b []byte) []byte {
		r := kmsg.NewPtrSASLAuthenticateRequest()
		r.SetVersion(version)
		r.SASLAuthBytes = b
		return r.AppendTo(nil)
	}
	f.Add(uint8(0), uint8(0), []byte("\x00alice\x00pw"), []byte(nil))
	f.Add(uint8(0), uint8(1), authBody(1, []byte("\x00alice\x00pw")), []byte(nil))
	f.Add(uint8(1), uint8(0), []byte("n,,n=alice,r=abc"), []byte("c=biws,r=abc,p=AAAA"))
	f.Add(uint8(2), uint8(3), authBody(2, []byte("n,,n=alice,r=abc")), authBody(2, []byte("c=biws,r=abcd,p=")))
	f.Add(uint8(1), uint8(1), authBody(0, []byte("y,a=alice,n=alice,r=x,ext=1")), []byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, mech, version uint8, first, second []byte) {
		ours, theirs := net.Pipe()
		defer ours.Close()
		go io.Copy(io.Discard, theirs)
		c := newConn(srv, ours)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Mechanism = saslMechanisms[int(mech)%len(saslMechanisms)]
		hs.SetVersion(int16(min(version, 1)))
		if err := c.serveFrame(frameOf(17, hs.Version, hs.AppendTo(nil))); err != nil {
			t.Fatalf("handshake: %v", err)
		}
		for _, msg := range [][]byte{first, second} {
			frame := msg
			if !c.sasl.raw {
				frame = frameOf(36, int16(version%3), msg)
			}
			if len(frame) < minHeaderSize && !c.sasl.raw {
				break
			}
			err := c.serveFrame(frame)
			if errors.Is(err, errHandlerPanic) {
				t.Fatal(err)
			}
			if err != nil || c.sasl.authenticated {
				break
			}
		}
		if c.sasl.authenticated && c.sasl.principal != "alice" {
			t.Fatalf("authenticated as %q", c.sasl.principal)
		}
	})
}
