package tcptransport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/sluice-mq/sluice/internal/testlog"
)

// recorder is a Receiver that keeps what arrives.
type recorder struct {
	mu      sync.Mutex
	batches []multiraft.Batch
	got     chan struct{}
}

func newRecorder() *recorder { return &recorder{got: make(chan struct{}, 1<<16)} }

func (r *recorder) Receive(b multiraft.Batch) {
	r.mu.Lock()
	r.batches = append(r.batches, b)
	r.mu.Unlock()
	r.got <- struct{}{}
}

func (r *recorder) all() []multiraft.Batch {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]multiraft.Batch(nil), r.batches...)
}

// serving starts a transport for node 1 of cluster "c1" with peer 2, serving on a fresh
// loopback listener into a recorder; it returns the transport, its address, the recorder
// and its log.
func serving(t *testing.T, cfg Config) (*Transport, string, *recorder, *testlog.Buffer) {
	t.Helper()
	logs := &testlog.Buffer{}
	if cfg.Node == 0 {
		cfg.Node = 1
	}
	if cfg.ClusterID == "" {
		cfg.ClusterID = "c1"
	}
	if cfg.Peers == nil {
		cfg.Peers = map[multiraft.NodeID]string{2: "127.0.0.1:1"}
	}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})) // refusals past the first of a window are debug lines
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	tr.Serve(ln, rec)
	t.Cleanup(func() {
		_ = tr.Close()
		if t.Failed() {
			t.Logf("log:\n%s", logs)
		}
	})
	return tr, ln.Addr().String(), rec, logs
}

func rawFrame(p []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(p)))
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(p, castagnoli))
	return append(b, p...)
}

// TestRefusesBadPeers: a listener refuses, with a log line saying why and without a
// panic, anything but a peer of its cluster naming itself and this node; once admitted,
// an oversized, torn, corrupt or undecodable frame closes the connection. Only the good
// frame at the end is delivered, as from the node the handshake named.
func TestRefusesBadPeers(t *testing.T) {
	tr, addr, rec, logs := serving(t, Config{MaxFrame: 1 << 16})
	good := appendHello(nil, hello{Version: version, Cluster: "c1", From: 2, To: 1})
	checksum := rawFrame([]byte{1, 0, 2, 0x08, 0x01})
	checksum[7] ^= 1
	for _, tc := range []struct {
		name   string
		send   []byte
		answer Code // expected answer to the hello; 255: no answer
		log    string
		torn   bool // the sender closes its side after sending
	}{
		{"http", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), 255, "not a sluice peer", false},
		{"tls client hello", []byte{0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5, 6, 7, 8}, 255, "not a sluice peer", false},
		{"torn hello", good[:10], 255, "not a sluice peer", true},
		{"other cluster", appendHello(nil, hello{Version: version, Cluster: "c2", From: 2, To: 1}), WrongCluster, "wrong cluster id", false},
		{"meant another node", appendHello(nil, hello{Version: version, Cluster: "c1", From: 2, To: 3}), WrongNode, "wrong node id", false},
		{"unknown sender", appendHello(nil, hello{Version: version, Cluster: "c1", From: 9, To: 1}), UnknownPeer, "unknown peer", false},
		{"claims to be us", appendHello(nil, hello{Version: version, Cluster: "c1", From: 1, To: 1}), UnknownPeer, "unknown peer", false},
		{"future version", appendHello(nil, hello{Version: 2, Cluster: "c1", From: 2, To: 1}), VersionMismatch, "version mismatch", false},
		{"oversized frame", append(bytes.Clone(good), 0, 1, 0, 1, 0, 0, 0, 0), Accepted, "over the 65536-byte maximum", false},
		{"torn frame", append(bytes.Clone(good), rawFrame([]byte{1, 0, 3, 8, 1, 16})[:11]...), Accepted, "torn", true},
		{"checksum mismatch", append(bytes.Clone(good), checksum...), Accepted, "checksum mismatch", false},
		{"garbage payload", append(bytes.Clone(good), rawFrame([]byte{1, 0, 3, 0xff, 0xff, 0xff})...), Accepted, "message 0", false},
		{"unknown flag", append(bytes.Clone(good), rawFrame([]byte{1, 2, 0})...), Accepted, "unknown flags", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			if tc.torn {
				_ = c.(*net.TCPConn).CloseWrite()
			}
			if tc.answer != 255 {
				h, err := readHello(c)
				if err != nil || h.Code != tc.answer || h.From != 1 || h.Cluster != "c1" {
					t.Fatalf("answer %+v, %v; want code %v from node 1 of c1", h, err, tc.answer)
				}
			}
			// Closed: EOF, or a reset when the listener left bytes unread.
			if n, err := io.Copy(io.Discard, c); (err != nil && !errors.Is(err, syscall.ECONNRESET)) || n != 0 {
				t.Fatalf("after the refusal: %d more bytes, %v; want the connection closed", n, err)
			}
			waitLog(t, logs, tc.log)
		})
	}
	if n := len(rec.all()); n != 0 {
		t.Fatalf("%d batches delivered from refused connections", n)
	}
	// A good peer still gets through, and its frames are taken as from the node its
	// handshake named, whatever the messages inside claim.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	frame, _, _ := appendFrames(nil, []multiraft.Message{{Group: 5, Msg: raftpb.Message{Type: raftpb.MsgHeartbeat, From: 2, To: 1, Term: 4}}}, 1<<16)
	_, _ = c.Write(append(bytes.Clone(good), frame...))
	if h, err := readHello(c); err != nil || h.Code != Accepted {
		t.Fatalf("%+v %v", h, err)
	}
	<-rec.got
	b := rec.all()[0]
	if b.From != 2 || b.To != 1 || len(b.Messages) != 1 || b.Messages[0].Group != 5 || b.Messages[0].Msg.Term != 4 {
		t.Fatalf("delivered %+v", b)
	}
	st := tr.Stats()
	if st.Refused != 8 || st.BadFrames != 4 || st.BatchesReceived != 1 {
		t.Fatalf("stats %+v: want 8 refused handshakes, 4 bad frames (a torn one is a lost connection), 1 batch", st)
	}
}

func waitLog(t *testing.T, logs *testlog.Buffer, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no log line mentioning %q", want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestDiallerRefused: a transport dialling a node of another cluster, or a node that is
// not the one it meant, gets refused at the handshake, logs why and delivers nothing.
func TestDiallerRefused(t *testing.T) {
	for _, tc := range []struct {
		name     string
		listener Config
		log      string
	}{
		{"other cluster", Config{Node: 2, ClusterID: "c2", Peers: map[multiraft.NodeID]string{1: "127.0.0.1:1"}}, "wrong cluster id"},
		{"another node at the address", Config{Node: 3, ClusterID: "c1", Peers: map[multiraft.NodeID]string{1: "127.0.0.1:1"}}, "wrong node id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, addr, rec, _ := serving(t, tc.listener)
			dialler, _, _, logs := serving(t, Config{Node: 1, ClusterID: "c1", Peers: map[multiraft.NodeID]string{2: addr}})
			dialler.Send(multiraft.Batch{From: 1, To: 2})
			waitLog(t, logs, "refused by peer: "+tc.log)
			for deadline := time.Now().Add(5 * time.Second); dialler.Stats().Dropped == 0 && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond) // the batch is counted dropped just after the log line
			}
			if st := dialler.Stats(); st.DialFailures == 0 || st.BatchesSent != 0 || st.Dropped != 1 {
				t.Fatalf("dialler stats %+v", st)
			}
			if len(rec.all()) != 0 {
				t.Fatal("a refused dialler's batch was delivered")
			}
		})
	}
}
