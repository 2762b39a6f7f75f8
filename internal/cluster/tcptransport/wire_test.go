package tcptransport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"go.etcd.io/raft/v3/raftpb"
)

func sampleMessages() []multiraft.Message {
	return []multiraft.Message{
		{Group: 1, Msg: raftpb.Message{Type: raftpb.MsgApp, From: 1, To: 2, Term: 3, Index: 9, LogTerm: 2, Commit: 8,
			Entries: []raftpb.Entry{{Term: 3, Index: 10, Data: []byte("hello")}, {Term: 3, Index: 11, Data: bytes.Repeat([]byte{7}, 300)}}}},
		{Group: 1 << 40, Quiesce: true, Msg: raftpb.Message{Type: raftpb.MsgHeartbeat, From: 1, To: 2, Term: 3, Commit: 11}},
		{Group: 7, Msg: raftpb.Message{Type: raftpb.MsgSnap, From: 1, To: 2, Term: 4,
			Snapshot: &raftpb.Snapshot{Data: []byte("state"), Metadata: raftpb.SnapshotMetadata{Index: 20, Term: 4,
				ConfState: raftpb.ConfState{Voters: []uint64{1, 2, 3}}}}}},
	}
}

// decodeStream reads frames until EOF.
func decodeStream(t *testing.T, b []byte, maxFrame int) (frames [][]multiraft.Message) {
	t.Helper()
	r := bytes.NewReader(b)
	var buf []byte
	for {
		var err error
		buf, err = readFrame(r, buf, maxFrame)
		if errors.Is(err, io.EOF) {
			return frames
		}
		if err != nil {
			t.Fatalf("frame %d: %v", len(frames), err)
		}
		msgs, err := decodePayload(buf)
		if err != nil {
			t.Fatalf("frame %d: %v", len(frames), err)
		}
		frames = append(frames, msgs)
	}
}

func TestFrameRoundTrip(t *testing.T) {
	msgs := sampleMessages()
	one := func(m multiraft.Message) int {
		b, _, _ := appendFrames(nil, []multiraft.Message{m}, 1<<20)
		return len(b) - frameHeader
	}
	for _, tc := range []struct {
		name            string
		msgs            []multiraft.Message
		maxFrame        int
		frames, dropped int
	}{
		{"beat", nil, 1 << 20, 1, 0},
		{"all in one", msgs, 1 << 20, 1, 0},
		{"split at the limit", msgs, one(msgs[0]) + one(msgs[1]), 2, 0},
		{"tight", msgs, one(msgs[0]), 2, 0}, // the first alone, then the two small ones
		{"oversized dropped", msgs, one(msgs[1]), 1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, frames, dropped := appendFrames(nil, tc.msgs, tc.maxFrame)
			if frames != tc.frames || dropped != tc.dropped {
				t.Fatalf("frames %d dropped %d, want %d and %d", frames, dropped, tc.frames, tc.dropped)
			}
			got := decodeStream(t, b, tc.maxFrame)
			if len(got) != tc.frames {
				t.Fatalf("decoded %d frames, want %d", len(got), tc.frames)
			}
			var flat []multiraft.Message
			for _, f := range got {
				flat = append(flat, f...)
			}
			var want []multiraft.Message
			for _, m := range tc.msgs {
				if tc.dropped == 0 || m.Msg.Type == raftpb.MsgHeartbeat {
					want = append(want, m)
				}
			}
			if !reflect.DeepEqual(flat, want) {
				t.Fatalf("decoded %+v\nwant %+v", flat, want)
			}
		})
	}
}

// TestFrameRefusals: every way a frame can be wrong is an error naming it, never a panic.
func TestFrameRefusals(t *testing.T) {
	good, _, _ := appendFrames(nil, sampleMessages(), 1<<20)
	payload := good[frameHeader:]
	frame := func(p []byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(len(p)))
		b = binary.BigEndian.AppendUint32(b, crc32.Checksum(p, castagnoli))
		return append(b, p...)
	}
	flipped := bytes.Clone(good)
	flipped[len(flipped)-1] ^= 1
	limit := len(payload)
	for _, tc := range []struct {
		name, in, want string
		limit          int
	}{
		{"oversized", string(good), "over the", limit - 1},
		{"torn", string(good[:len(good)-3]), "torn", limit},
		{"checksum", string(flipped), "checksum", limit},
		{"trailing garbage", string(frame(append(bytes.Clone(payload), 0x01))), "message 3", limit + 1},
		{"unknown flags", string(frame([]byte{1, 0x80, 0})), "unknown flags", limit},
		{"size past the end", string(frame([]byte{1, 0, 50, 1})), "size", limit},
		{"not a raft message", string(frame([]byte{1, 0, 3, 0xff, 0xff, 0xff})), "message 0", limit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf, err := readFrame(strings.NewReader(tc.in), nil, tc.limit)
			if err == nil {
				_, err = decodePayload(buf)
			}
			var fe *FrameError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a FrameError mentioning %q", err, tc.want)
			}
		})
	}
}

func TestHelloRoundTripAndRefusals(t *testing.T) {
	h := hello{Version: version, Code: WrongCluster, Cluster: "prod-eu", From: 3, To: 1 << 60}
	b := appendHello(nil, h)
	got, err := readHello(bytes.NewReader(b))
	if err != nil || got != h {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	long := appendHello(nil, hello{Cluster: strings.Repeat("x", 65)})
	flip := bytes.Clone(b)
	flip[10] ^= 1
	for name, in := range map[string][]byte{
		"empty":      nil,
		"http":       []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		"torn":       b[:len(b)-1],
		"checksum":   flip,
		"long id":    long,
		"bad magic":  append([]byte("SLRX"), b[4:]...),
		"only magic": []byte(magic),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := readHello(bytes.NewReader(in)); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// FuzzHello: any bytes are a hello or an error (never a panic, never more than a hello's
// worth read), and what decodes re-encodes to the same bytes.
func FuzzHello(f *testing.F) {
	f.Add(appendHello(nil, hello{Version: 1, Cluster: "c", From: 1, To: 2}))
	f.Add(appendHello(nil, hello{Version: 9, Code: 3, Cluster: strings.Repeat("z", 64), From: 1 << 63}))
	f.Add([]byte("SLRT\x00\x01\x00\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		h, err := readHello(r)
		if read := len(b) - r.Len(); read > helloFixed+MaxClusterID+helloTail {
			t.Fatalf("read %d bytes", read)
		}
		if err != nil {
			return
		}
		if again := appendHello(nil, h); !bytes.Equal(again, b[:len(again)]) {
			t.Fatalf("re-encoded %x, read %x", again, b[:len(again)])
		}
	})
}

// FuzzFrame: any byte stream decodes frame by frame or stops at an error, never panics
// and never reads past maxFrame; a decoded frame re-encodes and decodes to the same
// messages.
func FuzzFrame(f *testing.F) {
	good, _, _ := appendFrames(nil, sampleMessages(), 1<<20)
	beat, _, _ := appendFrames(nil, nil, 1<<20)
	f.Add(good)
	f.Add(append(bytes.Clone(beat), good...))
	f.Add(good[:len(good)/2])
	f.Add([]byte{0, 0, 0, 5, 0, 0, 0, 0, 1, 0, 1, 0})
	f.Add(good[frameHeader:])
	f.Fuzz(func(t *testing.T, b []byte) {
		// The bytes as a payload (past the checksum, which the fuzzer rarely gets right)...
		if msgs, err := decodePayload(b); err == nil {
			roundTrip(t, msgs)
		}
		// ...and as a stream of frames.
		const maxFrame = 4096
		r := bytes.NewReader(b)
		var buf []byte
		for {
			var err error
			if buf, err = readFrame(r, buf, maxFrame); err != nil {
				return
			}
			msgs, err := decodePayload(buf)
			if err != nil {
				return
			}
			roundTrip(t, msgs)
		}
	})
}

func roundTrip(t *testing.T, msgs []multiraft.Message) {
	enc, frames, dropped := appendFrames(nil, msgs, 1<<20)
	if frames != 1 || dropped != 0 {
		t.Fatalf("re-encoding %d messages: %d frames, %d dropped", len(msgs), frames, dropped)
	}
	again, err := decodePayload(enc[frameHeader:])
	if err != nil || !reflect.DeepEqual(again, msgs) {
		t.Fatalf("re-decoded %+v, %v; want %+v", again, err, msgs)
	}
}

// BenchmarkFrame: encoding and decoding one frame of a round's heartbeats to one peer (n
// groups), the transport's per-message CPU and bytes.
//
//	go test -run '^$' -bench Frame ./internal/cluster/tcptransport/
func BenchmarkFrame(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		msgs := make([]multiraft.Message, n)
		for i := range msgs {
			msgs[i] = multiraft.Message{Group: multiraft.GroupID(i + 1), Msg: raftpb.Message{
				Type: raftpb.MsgHeartbeat, From: 1, To: 2, Term: 7, Commit: 123456}}
		}
		b.Run(fmt.Sprintf("heartbeats=%d/encode", n), func(b *testing.B) {
			var buf []byte
			for b.Loop() {
				buf, _, _ = appendFrames(buf[:0], msgs, 64<<20)
			}
			b.ReportMetric(float64(len(buf))/float64(n), "bytes/msg")
		})
		b.Run(fmt.Sprintf("heartbeats=%d/decode", n), func(b *testing.B) {
			buf, _, _ := appendFrames(nil, msgs, 64<<20)
			for b.Loop() {
				if _, err := decodePayload(buf[frameHeader:]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
