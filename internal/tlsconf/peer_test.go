package tlsconf

import (
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/testproc"
	"github.com/sluice-mq/sluice/internal/tlsconf/tlstest"
)

// peerPKI is two CAs with node certificates: node-1 and node-2 of "cluster", node-2 of
// "other".
type peerPKI struct {
	dir                string
	cluster, other     *tlstest.CA
	n1, n2, rogue      tlstest.Pair
	clusterCA, otherCA string
}

func newPeerPKI(t *testing.T) *peerPKI {
	t.Helper()
	if err := tlstest.Available(); err != nil {
		testproc.Missing(t, "openssl is not installed ("+err.Error()+"): apt-get install openssl")
	}
	p := &peerPKI{dir: t.TempDir()}
	var err error
	must := func(e error) {
		if e != nil {
			t.Fatal(e)
		}
	}
	p.cluster, err = tlstest.NewCA(p.dir, "cluster")
	must(err)
	p.other, err = tlstest.NewCA(p.dir, "other")
	must(err)
	p.n1, err = p.cluster.Issue("n1", "node-1", 1)
	must(err)
	p.n2, err = p.cluster.Issue("n2", "node-2", 2)
	must(err)
	p.rogue, err = p.other.Issue("rogue", "node-2", 3)
	must(err)
	p.clusterCA, p.otherCA = p.cluster.Cert, p.other.Cert
	return p
}

func (p *peerPKI) reloader(t *testing.T, pair tlstest.Pair, ca string) *Reloader {
	t.Helper()
	r, err := New(Options{CertFile: pair.Cert, KeyFile: pair.Key, ClientCAFile: ca,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// handshake runs server and client halves over loopback TCP; it returns the server's view
// of the connection and each side's error.
func handshake(t *testing.T, server, client *Reloader, serverName string) (cs tls.ConnectionState, srvErr, cliErr error) {
	t.Helper()
	sc, err := server.PeerServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	cc, err := client.PeerClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	cc = cc.Clone()
	cc.ServerName = serverName
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		err error
		cs  tls.ConnectionState
	}
	done := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer c.Close()
		srv := tls.Server(c, sc)
		err = srv.Handshake()
		if err == nil {
			_, err = srv.Read(make([]byte, 1)) // the client's verdict on the server arrives after
		}
		done <- result{err, srv.ConnectionState()}
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	cli := tls.Client(raw, cc)
	cliErr = cli.Handshake()
	if cliErr == nil {
		_, cliErr = cli.Write([]byte{1})
	}
	if cliErr != nil {
		raw.Close()
	}
	res := <-done
	return res.cs, res.err, cliErr
}

// TestPeerConfigs: two nodes of one CA shake hands both ways and see each other's node
// name; a certificate of another CA is refused by either side; a name that is not the
// certificate's is not checked (the node name is); both halves need the CA file.
func TestPeerConfigs(t *testing.T) {
	p := newPeerPKI(t)
	n1, n2 := p.reloader(t, p.n1, p.clusterCA), p.reloader(t, p.n2, p.clusterCA)
	cs, srvErr, cliErr := handshake(t, n1, n2, "127.0.0.1")
	if srvErr != nil || cliErr != nil {
		t.Fatalf("node-2 dialling node-1: server %v, client %v", srvErr, cliErr)
	}
	if got := PeerName(cs); got != "node-2" {
		t.Errorf("node-1 sees %q, want node-2", got)
	}
	// node-2's CA is another: node-1 must refuse node-2 as a client, and node-2 (trusting
	// its own CA) must refuse node-1 as a server.
	rogue := p.reloader(t, p.rogue, p.otherCA)
	// It trusts the cluster's CA, so node-1's refusal is what stops it.
	trusting := p.reloader(t, p.rogue, p.clusterCA)
	if _, srvErr, cliErr := handshake(t, n1, trusting, "127.0.0.1"); srvErr == nil || !strings.Contains(srvErr.Error(), "certificate") {
		t.Errorf("node-1 accepting a client certificate of another CA: %v (client %v), want refused", srvErr, cliErr)
	}
	if _, _, cliErr := handshake(t, rogue, n1, "127.0.0.1"); cliErr == nil || !strings.Contains(cliErr.Error(), "certificate") {
		t.Errorf("node-1 dialling a server of another CA: %v, want refused", cliErr)
	}
	if cs, srvErr, cliErr := handshake(t, n1, n2, "10.9.9.9"); srvErr != nil || cliErr != nil || PeerName(cs) != "node-2" {
		// A peer is its node name, not an address (the node's VerifyPeer binds it).
		t.Errorf("dialled under another name: server %v, client %v", srvErr, cliErr)
	}
	noCA := p.reloader(t, p.n1, "")
	if _, err := noCA.PeerServerConfig(); err != ErrNoPeerCA {
		t.Errorf("PeerServerConfig without a CA: %v", err)
	}
	if _, err := noCA.PeerClientConfig(); err != ErrNoPeerCA {
		t.Errorf("PeerClientConfig without a CA: %v", err)
	}
}

// TestPeerConfigsReloadCA: the dialler's check uses the CA of the latest reload, not the
// one its config was made with.
func TestPeerConfigsReloadCA(t *testing.T) {
	p := newPeerPKI(t)
	live := filepath.Join(p.dir, "live-ca.crt")
	if err := tlstest.Install(tlstest.Pair{Cert: p.clusterCA, Key: p.cluster.Key}, live, filepath.Join(p.dir, "live-ca.key")); err != nil {
		t.Fatal(err)
	}
	dialler := p.reloader(t, p.rogue, live) // its own certificate is of the other CA, which the server trusts
	rogue := p.reloader(t, p.rogue, p.otherCA)
	if _, _, cliErr := handshake(t, rogue, dialler, "127.0.0.1"); cliErr == nil {
		t.Fatal("accepted another CA's server before the reload")
	}
	if err := tlstest.Install(tlstest.Pair{Cert: p.otherCA, Key: p.other.Key}, live, filepath.Join(p.dir, "live-ca.key")); err != nil {
		t.Fatal(err)
	}
	if err := dialler.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, _, cliErr := handshake(t, rogue, dialler, "127.0.0.1"); cliErr != nil {
		t.Errorf("after the CA was reloaded to the other CA: %v", cliErr)
	}
}
