package tcptransport

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/faultproxy"
	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/sluice-mq/sluice/internal/testlog"
)

func beatTo(to multiraft.NodeID, term uint64) multiraft.Batch {
	return multiraft.Batch{From: 1, To: to, Messages: []multiraft.Message{{Group: 1,
		Msg: raftpb.Message{Type: raftpb.MsgHeartbeat, From: 1, To: uint64(to), Term: term}}}}
}

func hasTerm(rec *recorder, term uint64) bool {
	for _, b := range rec.all() {
		for _, m := range b.Messages {
			if m.Msg.Term == term {
				return true
			}
		}
	}
	return false
}

// deliver sends a heartbeat of the given term every few milliseconds until it arrives.
func deliver(t *testing.T, tr *Transport, rec *recorder, term uint64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !hasTerm(rec, term) {
		if time.Now().After(deadline) {
			t.Fatalf("term %d not delivered within %v: %+v", term, within, tr.Stats())
		}
		tr.Send(beatTo(2, term))
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSendNeverBlocks: Send returns at once whatever the peer does. While the peer's
// handshake stalls, the bounded queue fills and the rest is dropped and counted; once the
// peer answers, batches flow; when the peer stops reading mid-stream, the write deadline
// cuts the connection and the transport reconnects when it reads again.
func TestSendNeverBlocks(t *testing.T) {
	_, addr, rec, _ := serving(t, Config{Node: 2, Peers: map[multiraft.NodeID]string{1: "127.0.0.1:1"}})
	px, err := faultproxy.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	logs := &testlog.Buffer{}
	tr, err := New(Config{Node: 1, ClusterID: "c1", Peers: map[multiraft.NodeID]string{2: px.Addr()},
		QueueBatches: 64, QueueBytes: 4 << 20, HandshakeTimeout: time.Second, WriteTimeout: time.Second,
		BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	defer func() {
		if t.Failed() {
			t.Logf("dialler log:\n%s", logs)
		}
	}()
	var slowest time.Duration
	send := func(b multiraft.Batch) {
		start := time.Now()
		tr.Send(b)
		slowest = max(slowest, time.Since(start))
	}

	px.Set(faultproxy.Stall) // the handshake never gets an answer
	const n = 20000
	for range n {
		send(beatTo(2, 1))
	}
	if st := tr.Stats(); st.Dropped < n-4*64 {
		t.Fatalf("%+v: want nearly all of %d batches dropped while the peer does not answer", st, n)
	}

	px.Set(faultproxy.Pass)
	deliver(t, tr, rec, 2, 5*time.Second)

	// The peer stops reading: writes pile up in the socket buffers, then one blocks and
	// its deadline cuts the connection.
	px.Set(faultproxy.Stall)
	big := beatTo(2, 3)
	big.Messages[0].Msg = raftpb.Message{Type: raftpb.MsgApp, From: 1, To: 2, Term: 3,
		Entries: []raftpb.Entry{{Data: bytes.Repeat([]byte{1}, 1<<20)}}}
	deadline := time.Now().Add(10 * time.Second)
	for !bytes.Contains([]byte(logs.String()), []byte("write to peer failed")) {
		if time.Now().After(deadline) {
			t.Fatalf("no write deadline after 10s of a stalled peer: %+v", tr.Stats())
		}
		send(big)
		time.Sleep(2 * time.Millisecond)
	}
	px.Set(faultproxy.Pass)
	deliver(t, tr, rec, 4, 5*time.Second)
	// A Send that waited on the network would take a HandshakeTimeout or WriteTimeout (1s);
	// half that leaves room for a loaded machine's scheduling.
	if slowest > 500*time.Millisecond {
		t.Fatalf("the slowest Send took %v", slowest)
	}
}

// TestCloseDuringHandshake: Close returns at once even while a dial waits for a peer's
// answer that never comes (and would otherwise wait out the handshake timeout).
func TestCloseDuringHandshake(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // accepts (the backlog), never reads
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	tr, err := New(Config{Node: 1, ClusterID: "c1", Peers: map[multiraft.NodeID]string{2: ln.Addr().String()},
		HandshakeTimeout: 5 * time.Second, Logger: slog.New(slog.NewTextHandler(&testlog.Buffer{}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	tr.Send(beatTo(2, 1))
	for tr.Stats().Dials == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // into the handshake
	start := time.Now()
	_ = tr.Close()
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close took %v during a handshake", d)
	}
}

// TestCoalescing: batches queued while a write is in flight all leave in the next write,
// as one frame, in order.
func TestCoalescing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	release := make(chan struct{})
	type result struct {
		frames [][]multiraft.Message
		err    error
	}
	done := make(chan result, 1)
	go func() { // a peer that answers the handshake, then reads nothing until released
		c, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer c.Close()
		if _, err := readHello(c); err != nil {
			done <- result{err: err}
			return
		}
		_, _ = c.Write(appendHello(nil, hello{Version: version, Cluster: "c1", From: 2, To: 1}))
		<-release
		var r result
		var buf []byte
		for n := 0; n < 101; {
			if buf, r.err = readFrame(c, buf, 64<<20); r.err != nil {
				break
			}
			msgs, err := decodePayload(buf)
			if r.err = err; err != nil {
				break
			}
			r.frames = append(r.frames, msgs)
			n += len(msgs)
		}
		done <- r
	}()
	tr, err := New(Config{Node: 1, ClusterID: "c1", Peers: map[multiraft.NodeID]string{2: ln.Addr().String()},
		Logger: slog.New(slog.NewTextHandler(&testlog.Buffer{}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	big := beatTo(2, 0)
	big.Messages[0].Msg = raftpb.Message{Type: raftpb.MsgApp, From: 1, To: 2,
		Entries: []raftpb.Entry{{Data: bytes.Repeat([]byte{1}, 16<<20)}}} // more than the socket buffers hold
	tr.Send(big)
	p := tr.peer(2)
	for { // wait until the writer took it: it is now blocked writing it
		p.mu.Lock()
		n := len(p.queue)
		p.mu.Unlock()
		if n == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	for i := 1; i <= 100; i++ {
		tr.Send(beatTo(2, uint64(i)))
	}
	close(release)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.frames) != 2 || len(r.frames[0]) != 1 || len(r.frames[1]) != 100 {
		t.Fatalf("got %d frames, want the big batch and then one frame of the 100 queued behind it", len(r.frames))
	}
	for i, m := range r.frames[1] {
		if m.Msg.Term != uint64(i+1) {
			t.Fatalf("message %d has term %d: out of order", i, m.Msg.Term)
		}
	}
	for tr.Stats().BatchesSent < 101 {
		time.Sleep(time.Millisecond)
	}
	if st := tr.Stats(); st.Writes != 2 || st.BatchesSent != 101 || st.FramesSent != 2 {
		t.Fatalf("%+v: want 101 batches in 2 writes and 2 frames", st)
	}
}

// TestSetPeer: a node added later is sent to once SetPeer names it, a node that moves is
// followed to its new address, and a removed node is neither sent to nor accepted from.
func TestSetPeer(t *testing.T) {
	b1, addr1, rec1, _ := serving(t, Config{Node: 2, Peers: map[multiraft.NodeID]string{1: "127.0.0.1:1"}})
	_, addr2, rec2, _ := serving(t, Config{Node: 2, Peers: map[multiraft.NodeID]string{1: "127.0.0.1:1"}})
	tr, _, _, _ := serving(t, Config{Node: 1, Peers: map[multiraft.NodeID]string{}})
	tr.Send(beatTo(2, 1))
	if st := tr.Stats(); st.Dropped != 1 {
		t.Fatalf("a batch to a node that is not a peer yet: %+v", st)
	}
	if err := tr.SetPeer(2, addr1); err != nil {
		t.Fatal(err)
	}
	deliver(t, tr, rec1, 2, 5*time.Second)
	if err := tr.SetPeer(2, addr2); err != nil { // node 2 moved
		t.Fatal(err)
	}
	deliver(t, tr, rec2, 3, 5*time.Second)
	if err := tr.SetPeer(1, "x"); err == nil {
		t.Fatal("SetPeer accepted this node's own id")
	}

	// The listener side: node 2 (first address) forgets node 1, whose dial is refused.
	if err := tr.SetPeer(2, addr1); err != nil {
		t.Fatal(err)
	}
	deliver(t, tr, rec1, 4, 5*time.Second)
	b1.RemovePeer(1)
	refused := b1.Stats().Refused
	deadline := time.Now().Add(5 * time.Second)
	for b1.Stats().Refused == refused {
		if time.Now().After(deadline) {
			t.Fatalf("node 1 still accepted after RemovePeer: %+v", b1.Stats())
		}
		tr.Send(beatTo(2, 5))
		time.Sleep(5 * time.Millisecond)
	}
	if hasTerm(rec1, 5) {
		t.Fatal("a batch from a removed peer was delivered")
	}
	tr.RemovePeer(2)
	dropped := tr.Stats().Dropped
	tr.Send(beatTo(2, 6))
	if tr.Stats().Dropped != dropped+1 {
		t.Fatal("a batch to a removed peer was not dropped")
	}
}

// TestSlowReaderNotCut: the write deadline measures progress: a write much larger than
// the peer reads in one WriteTimeout still goes through while the peer keeps reading (it
// was cut when one deadline covered the whole write).
func TestSlowReaderNotCut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() { // a peer that reads about 6 MB/s
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		if _, err := readHello(c); err != nil {
			done <- err
			return
		}
		_, _ = c.Write(appendHello(nil, hello{Version: version, Cluster: "c1", From: 2, To: 1}))
		slow := &throttled{r: c, chunk: 64 << 10, every: 10 * time.Millisecond}
		buf, err := readFrame(slow, nil, 64<<20)
		if err == nil {
			_, err = decodePayload(buf)
		}
		done <- err
	}()
	logs := &testlog.Buffer{}
	tr, err := New(Config{Node: 1, ClusterID: "c1", Peers: map[multiraft.NodeID]string{2: ln.Addr().String()},
		// Two seconds: seven times the 0.3 s between steps of progress (below), so a loaded
		// machine's late reader (-race, other jobs) is not taken for a stalled one; it once
		// was with one second, 1 run in 4 at load 4.
		WriteTimeout: 2 * time.Second, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	big := beatTo(2, 0)
	big.Messages[0].Msg = raftpb.Message{Type: raftpb.MsgApp, From: 1, To: 2,
		// About 4 s at 6 MB/s, twice WriteTimeout and well beyond what the socket buffers
		// hold; a writer blocked on a full send buffer is woken once half of it drained
		// (Linux), so progress comes in steps of about 2 MiB, 0.3 s apart here.
		Entries: []raftpb.Entry{{Data: bytes.Repeat([]byte{1}, 24<<20)}}}
	tr.Send(big)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the slow peer got %v; %+v; dialler log:\n%s", err, tr.Stats(), logs.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the frame never arrived")
	}
	if st := tr.Stats(); st.Dropped != 0 || st.BatchesSent != 1 {
		t.Fatalf("%+v", st)
	}
}

// throttled reads at most chunk bytes per every.
type throttled struct {
	r     io.Reader
	chunk int
	every time.Duration
}

func (t *throttled) Read(p []byte) (int, error) {
	time.Sleep(t.every)
	return t.r.Read(p[:min(len(p), t.chunk)])
}
