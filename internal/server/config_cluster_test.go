package server

import (
	"strings"
	"testing"
)

// TestValidateClusterTLS: a Raft transport beyond loopback needs mutual TLS (all three
// files), whatever --insecure-allow-anonymous says; on loopback it may go without.
func TestValidateClusterTLS(t *testing.T) {
	tlsFiles := func(c *Config) { c.ClusterTLSCert, c.ClusterTLSKey, c.ClusterTLSCA = "n1.crt", "n1.key", "ca.crt" }
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   string // "" valid; else the error's start
	}{
		{"loopback, no TLS", func(*Config) {}, ""},
		{"loopback, TLS", tlsFiles, ""},
		{"LAN, TLS", func(c *Config) { tlsFiles(c); c.ClusterAddr = "10.0.0.1:7100" }, ""},
		{"LAN, no TLS", func(c *Config) { c.ClusterAddr = "10.0.0.1:7100" }, "--cluster-addr: 10.0.0.1:7100 is not a loopback address"},
		{"LAN, no TLS, anonymous allowed", func(c *Config) { c.ClusterAddr, c.InsecureAllowAnonymous = "10.0.0.1:7100", true },
			"--cluster-addr: 10.0.0.1:7100 is not a loopback address"},
		{"all interfaces, no TLS", func(c *Config) { c.ClusterAddr = ":7100" }, "--cluster-addr"},
		{"cert and key, no CA", func(c *Config) { tlsFiles(c); c.ClusterTLSCA = "" }, "--cluster-tls-cert, --cluster-tls-key and --cluster-tls-ca"},
		{"CA only", func(c *Config) { c.ClusterTLSCA = "ca.crt" }, "--cluster-tls-cert, --cluster-tls-key and --cluster-tls-ca"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults()
			c.NodeID, c.ClusterAddr, c.ClusterPeers = 1, "127.0.0.1:7100", "1=127.0.0.1:7100"
			tc.mutate(&c)
			c.ClusterPeers = "1=" + c.ClusterAddr
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate = %v, want valid", err)
			case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
				t.Errorf("Validate = %v, want %q...", err, tc.want)
			case tc.want != "" && strings.HasPrefix(tc.want, "--cluster-addr") && !strings.Contains(err.Error(), "--cluster-tls-cert"):
				t.Errorf("Validate = %v: the refusal should name the TLS flags that lift it", err)
			}
		})
	}
}
