package main

import "testing"

func TestKafkaSASLFlags(t *testing.T) {
	for _, c := range []struct {
		mech string
		opts int
		ok   bool
	}{{"", 0, true}, {"PLAIN", 1, true}, {"SCRAM-SHA-256", 1, true}, {"SCRAM-SHA-512", 1, true}, {"GSSAPI", 0, false}} {
		opts, err := kafkaSASL{mechanism: c.mech, user: "u", password: "p"}.opts()
		if (err == nil) != c.ok || len(opts) != c.opts {
			t.Errorf("%q: %d opts, %v", c.mech, len(opts), err)
		}
	}
}
