package node

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/tcptransport"
	"github.com/sluice-mq/sluice/internal/server"
	"github.com/sluice-mq/sluice/internal/tlsconf"
)

// clusterTLS puts the Raft transport inside mutual TLS when --cluster-tls-cert, -key and
// -ca are given (docs/cluster.md, "Transport security"), and returns the reloader that
// serves the files (nil without them). A peer's certificate must chain to the cluster CA
// and name the node it speaks for (subject CN node-<id>): the transport's hello carries
// a node id, and without that binding any node of the cluster could speak as another
// (vote twice, say).
func clusterTLS(cfg server.Config, log *slog.Logger, tc *tcptransport.Config) (*tlsconf.Reloader, error) {
	if cfg.ClusterTLSCert == "" {
		return nil, nil
	}
	r, err := tlsconf.New(tlsconf.Options{CertFile: cfg.ClusterTLSCert, KeyFile: cfg.ClusterTLSKey,
		ClientCAFile: cfg.ClusterTLSCA, Logger: log.With("tls", "cluster"),
		Flags: [3]string{"--cluster-tls-cert", "--cluster-tls-key", "--cluster-tls-ca"},
		OnReload: func(leaf *x509.Certificate, err error) {
			if err == nil {
				log.Info("cluster: transport certificate reloaded", "subject", leaf.Subject.String(), "not_after", leaf.NotAfter)
			}
		}})
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if cn, want := r.Leaf().Subject.CommonName, nodeCN(tc.Node); cn != want {
		return nil, fmt.Errorf("--cluster-tls-cert: its subject CN is %q; node %d's must be %q (peers refuse any other)", cn, tc.Node, want)
	}
	if tc.ServerTLS, err = r.PeerServerConfig(); err != nil {
		return nil, fmt.Errorf("--cluster-tls-ca: %w", err)
	}
	if tc.ClientTLS, err = r.PeerClientConfig(); err != nil {
		return nil, fmt.Errorf("--cluster-tls-ca: %w", err)
	}
	tc.VerifyPeer = func(id multiraft.NodeID, cs tls.ConnectionState) error {
		if got, want := tlsconf.PeerName(cs), nodeCN(id); got != want {
			return fmt.Errorf("certificate of %q, not %q", got, want)
		}
		return nil
	}
	return r, nil
}

func nodeCN(id multiraft.NodeID) string { return fmt.Sprintf("node-%d", id) }
