package tcptransport_test

import (
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"github.com/sluice-mq/sluice/internal/cluster/tcptransport"
	"github.com/sluice-mq/sluice/internal/testlog"
)

// TestRefusalsDoNotFloodTheLog: twenty connections that are not TLS, made to a transport
// that requires it (a port scanner, anyone who can reach the cluster port), are each
// refused and counted, but logged as one warning, not twenty.
func TestRefusalsDoNotFloodTheLog(t *testing.T) {
	var logs testlog.Buffer // written by the transport's goroutines while the test reads it
	tr, err := tcptransport.New(tcptransport.Config{Node: 1, ClusterID: "test", ServerTLS: newPKI(t, "sluice test CA", 1).server(t, 1),
		HandshakeTimeout: 2 * time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go tr.Serve(ln, nopHost{})
	for range 20 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("GET / HTTP/1.1\r\n\r\n")) // not a TLS handshake
		c.Read(make([]byte, 64))                  // until the transport hangs up
		c.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for tr.Stats().Refused < 20 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := tr.Stats().Refused; got != 20 {
		t.Fatalf("refused %d connections, want 20", got)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Errorf("%d warnings for 20 refusals, want 1:\n%s", n, logs.String())
	}
}

// nopHost receives nothing: the connections of the test never get as far as a frame.
type nopHost struct{}

func (nopHost) Receive(multiraft.Batch) {}
