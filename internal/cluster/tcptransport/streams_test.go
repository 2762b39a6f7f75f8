package tcptransport

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// streamPair starts node 1 taking byte streams with handle (none if nil) and node 2
// dialling it.
func streamPair(t *testing.T, handle StreamHandler) (server, client *Transport) {
	return startPair(t, Config{IdleTimeout: 100 * time.Millisecond, Streams: handle}, "c1", newRecorder())
}

// TestStreams: a stream reaches the handler with its kind and the dialler's node id, and
// carries bytes both ways untouched — more than a socket buffer, and longer than the
// transport's idle timeout (a stream has none); each end's Close ends the other's reads.
func TestStreams(t *testing.T) {
	type opened struct {
		kind uint8
		from multiraft.NodeID
	}
	got := make(chan opened, 4)
	server, client := streamPair(t, func(kind uint8, from multiraft.NodeID, conn net.Conn) {
		got <- opened{kind, from}
		go func() {
			defer conn.Close()
			_, _ = io.Copy(conn, conn) // an echo until the dialler closes
		}()
	})
	ctx := context.Background()
	conn, err := client.DialStream(ctx, 1, 5)
	if err != nil {
		t.Fatal(err)
	}
	if o := <-got; o.kind != 5 || o.from != 2 {
		t.Fatalf("handler got kind %d from node %d, want 5 from 2", o.kind, o.from)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 256<<10) // 4 MiB
	go func() { _, _ = conn.Write(big) }()
	back := make([]byte, len(big))
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(conn, back); err != nil || !bytes.Equal(back, big) {
		t.Fatalf("echo of 4 MiB: %v (equal %v)", err, bytes.Equal(back, big))
	}
	time.Sleep(300 * time.Millisecond) // three idle timeouts: a raft stream would be cut
	if _, err := conn.Write([]byte("still")); err != nil {
		t.Fatal(err)
	}
	small := make([]byte, 5)
	if _, err := io.ReadFull(conn, small); err != nil || string(small) != "still" {
		t.Fatalf("after idling: %q, %v", small, err)
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	if st := client.Stats(); st.StreamsDialled != 1 {
		t.Errorf("StreamsDialled = %d", st.StreamsDialled)
	}
	if st := server.Stats(); st.StreamsAccepted != 1 {
		t.Errorf("StreamsAccepted = %d", st.StreamsAccepted)
	}
	if _, err := client.DialStream(ctx, 1, MaxStreamKind+1); err == nil {
		t.Error("a kind over MaxStreamKind was dialled")
	}
	if _, err := client.DialStream(ctx, 9, 1); err == nil {
		t.Error("a stream to a node that is no peer was dialled")
	}
}

// TestStreamsNotServed: a listener with no stream handler refuses a stream in the
// handshake, so the dialler knows nothing was sent; the raft and request streams go on.
func TestStreamsNotServed(t *testing.T) {
	_, client := streamPair(t, nil)
	_, err := client.DialStream(context.Background(), 1, 1)
	if err == nil || !strings.Contains(err.Error(), NotServed.String()) {
		t.Fatalf("DialStream to a node serving none: %v", err)
	}
}

// TestCloseEndsStreams: closing the transport closes the streams it accepted, even one
// the handler still holds, and Close does not wait for the handler to let go.
func TestCloseEndsStreams(t *testing.T) {
	held := make(chan net.Conn, 1)
	server, client := streamPair(t, func(_ uint8, _ multiraft.NodeID, conn net.Conn) { held <- conn })
	conn, err := client.DialStream(context.Background(), 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	<-held
	done := make(chan struct{})
	go func() { _ = server.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for a stream the handler holds")
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("the dialler's read after the listener closed: %v", err)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
