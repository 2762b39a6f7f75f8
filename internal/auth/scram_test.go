package auth

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"testing"
)

// TestCredentialMatchesRFC7677 checks the derived keys against the
// SCRAM-SHA-256 exchange printed in RFC 7677 §3: the server's signature
// computed from our ServerKey must be the one the RFC shows, and the
// client's proof must verify against our StoredKey.
func TestCredentialMatchesRFC7677(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	c, err := DeriveCredential(SCRAMSHA256, "pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	clientFirstBare := "n=user,r=rOprNGfwEbeRWgbNEkqO"
	serverFirst := "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
	clientFinalNoProof := "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
	authMessage := []byte(clientFirstBare + "," + serverFirst + "," + clientFinalNoProof)

	sig := HMAC(sha256.New, c.ServerKey, authMessage)
	if got := base64.StdEncoding.EncodeToString(sig); got != "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=" {
		t.Errorf("server signature %s", got)
	}
	proof, _ := base64.StdEncoding.DecodeString("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
	clientSig := HMAC(sha256.New, c.StoredKey, authMessage)
	clientKey := make([]byte, len(proof))
	for i := range proof {
		clientKey[i] = proof[i] ^ clientSig[i]
	}
	if !bytes.Equal(Sum(sha256.New, clientKey), c.StoredKey) {
		t.Error("the RFC's client proof does not verify against the derived StoredKey")
	}
}

func TestVerifyPassword(t *testing.T) {
	for _, m := range Mechanisms {
		c, err := NewCredential(m, "s3cret", 4096)
		if err != nil {
			t.Fatal(err)
		}
		if !c.VerifyPassword(m, "s3cret") {
			t.Errorf("%s: right password refused", m)
		}
		if c.VerifyPassword(m, "s3cret ") || c.VerifyPassword(m, "") {
			t.Errorf("%s: wrong password accepted", m)
		}
	}
	if _, err := DeriveCredential(SCRAMSHA256, "x", []byte("salt"), 100); err == nil {
		t.Error("100 iterations accepted")
	}
}
