package tcptransport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
)

// The wire format is drawn in doc.go.

const (
	magic   = "SLRT" // sluice raft transport
	version = 1

	// MaxClusterID is the longest cluster id a handshake carries.
	MaxClusterID = 64

	helloFixed  = 4 + 2 + 1 + 1 // magic, version, code, cluster id length
	helloTail   = 8 + 8 + 4     // from, to, crc
	frameHeader = 4 + 4         // payload length, crc

	flagQuiesce = 1 << 0
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Code is a listener's answer to a dialer's hello (0 in the dialer's own hello).
type Code uint8

// The answers a listener gives.
const (
	Accepted        Code = 0
	WrongCluster    Code = 1 // the dialer belongs to another cluster
	WrongNode       Code = 2 // the dialer meant to reach another node id at this address
	UnknownPeer     Code = 3 // the dialer's node id is not one of the listener's peers
	VersionMismatch Code = 4 // the listener does not speak the dialer's protocol version
	NotAuthorized   Code = 5 // the dialler's certificate does not vouch for the node id it claims
	NotServed       Code = 6 // the listener serves no byte streams of the kind the dialler asked for
)

func (c Code) String() string {
	switch c {
	case Accepted:
		return "accepted"
	case WrongCluster:
		return "wrong cluster id"
	case WrongNode:
		return "wrong node id"
	case UnknownPeer:
		return "unknown peer"
	case VersionMismatch:
		return "protocol version mismatch"
	case NotAuthorized:
		return "certificate does not match the node id"
	case NotServed:
		return "no such stream served"
	}
	return fmt.Sprintf("code %d", uint8(c))
}

// hello opens every connection: the dialer sends one naming itself and the node it means
// to reach; the listener answers with one naming itself and carrying its verdict.
type hello struct {
	Version  uint16
	Code     Code
	Cluster  string
	From, To multiraft.NodeID
}

// errBadHello is a handshake that is not sluice's, or is torn.
var errBadHello = errors.New("not a sluice raft transport handshake")

func appendHello(dst []byte, h hello) []byte {
	start := len(dst)
	dst = append(dst, magic...)
	dst = binary.BigEndian.AppendUint16(dst, h.Version)
	dst = append(dst, byte(h.Code), byte(len(h.Cluster)))
	dst = append(dst, h.Cluster...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.From))
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.To))
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// readHello reads and checks one hello. It reads at most helloFixed+MaxClusterID+helloTail
// bytes whatever the input.
func readHello(r io.Reader) (hello, error) {
	var buf [helloFixed + MaxClusterID + helloTail]byte
	if _, err := io.ReadFull(r, buf[:helloFixed]); err != nil {
		return hello{}, fmt.Errorf("read handshake: %w", err)
	}
	if string(buf[:4]) != magic {
		return hello{}, fmt.Errorf("%w: magic %q", errBadHello, buf[:4])
	}
	n := int(buf[7])
	if n > MaxClusterID {
		return hello{}, fmt.Errorf("%w: cluster id of %d bytes", errBadHello, n)
	}
	end := helloFixed + n + helloTail
	if _, err := io.ReadFull(r, buf[helloFixed:end]); err != nil {
		return hello{}, fmt.Errorf("read handshake: %w", err)
	}
	return parseHello(buf[:end])
}

// parseHello decodes a whole hello (exactly its bytes).
func parseHello(b []byte) (hello, error) {
	if len(b) < helloFixed+helloTail || string(b[:4]) != magic {
		return hello{}, errBadHello
	}
	n := int(b[7])
	if n > MaxClusterID || len(b) != helloFixed+n+helloTail {
		return hello{}, fmt.Errorf("%w: length", errBadHello)
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return hello{}, fmt.Errorf("%w: checksum", errBadHello)
	}
	p := b[helloFixed+n:]
	return hello{
		Version: binary.BigEndian.Uint16(b[4:]),
		Code:    Code(b[6]),
		Cluster: string(b[helloFixed : helloFixed+n]),
		From:    multiraft.NodeID(binary.BigEndian.Uint64(p)),
		To:      multiraft.NodeID(binary.BigEndian.Uint64(p[8:])),
	}, nil
}

// FrameError is a frame that closed its connection: oversized, torn, failing its checksum
// or not decoding.
type FrameError struct {
	Reason string
	torn   bool // the stream ended inside the frame
}

func (e *FrameError) Error() string { return "bad frame: " + e.Reason }

func frameErr(format string, a ...any) error { return &FrameError{Reason: fmt.Sprintf(format, a...)} }

// appendFrames encodes msgs as one or more frames of at most maxFrame payload bytes each,
// in order (an empty msgs is one empty frame: the liveness beat). A message that does not
// fit a frame on its own is left out and counted in dropped.
func appendFrames(dst []byte, msgs []multiraft.Message, maxFrame int) (out []byte, frames, dropped int) {
	start := len(dst)
	dst = append(dst, make([]byte, frameHeader)...)
	for i := range msgs {
		m := &msgs[i]
		size := m.Msg.Size()
		need := uvarintLen(uint64(m.Group)) + 1 + uvarintLen(uint64(size)) + size
		if need > maxFrame {
			dropped++
			continue
		}
		if len(dst)-start-frameHeader+need > maxFrame && len(dst) > start+frameHeader {
			dst = sealFrame(dst, start)
			frames++
			start = len(dst)
			dst = append(dst, make([]byte, frameHeader)...)
		}
		mark := len(dst)
		dst = binary.AppendUvarint(dst, uint64(m.Group))
		var flags byte
		if m.Quiesce {
			flags |= flagQuiesce
		}
		dst = append(dst, flags)
		dst = binary.AppendUvarint(dst, uint64(size))
		n := len(dst)
		dst = append(dst, make([]byte, size)...)
		if _, err := m.Msg.MarshalTo(dst[n:]); err != nil {
			// Marshalling a message held in memory does not fail; should it, the message
			// is lost like any other, and the frame stays well formed without it.
			dst = dst[:mark]
			dropped++
		}
	}
	return sealFrame(dst, start), frames + 1, dropped
}

// sealFrame writes the header of the frame begun at start and running to the end of dst.
func sealFrame(dst []byte, start int) []byte {
	payload := dst[start+frameHeader:]
	binary.BigEndian.PutUint32(dst[start:], uint32(len(payload)))
	binary.BigEndian.PutUint32(dst[start+4:], crc32.Checksum(payload, castagnoli))
	return dst
}

func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// readFrame reads one frame's payload into buf (grown as needed, and only as fast as bytes
// arrive, so a lying length costs no more memory than the peer actually sends).
func readFrame(r io.Reader, buf []byte, maxFrame int) ([]byte, error) {
	var hdr [frameHeader]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return buf, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if uint64(n) > uint64(maxFrame) {
		return buf, frameErr("length %d over the %d-byte maximum", n, maxFrame)
	}
	buf = buf[:0]
	for rem := int(n); rem > 0; {
		chunk := min(rem, 1<<20)
		off := len(buf)
		buf = append(buf, make([]byte, chunk)...)
		if _, err := io.ReadFull(r, buf[off:]); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return buf, &FrameError{Reason: fmt.Sprintf("torn: %v", err), torn: true}
		}
		rem -= chunk
	}
	if crc32.Checksum(buf, castagnoli) != binary.BigEndian.Uint32(hdr[4:]) {
		return buf, frameErr("checksum mismatch over %d bytes", n)
	}
	return buf, nil
}

// decodePayload decodes a frame's payload: messages back to back, none for a beat.
func decodePayload(p []byte) ([]multiraft.Message, error) {
	var msgs []multiraft.Message
	for i := 0; len(p) > 0; i++ {
		g, n := binary.Uvarint(p)
		if n <= 0 || len(p) < n+1 {
			return nil, frameErr("message %d: group id", i)
		}
		flags := p[n]
		if flags&^flagQuiesce != 0 {
			return nil, frameErr("message %d: unknown flags %#x", i, flags)
		}
		p = p[n+1:]
		size, n := binary.Uvarint(p)
		if n <= 0 || size > uint64(len(p)-n) {
			return nil, frameErr("message %d: size", i)
		}
		m := multiraft.Message{Group: multiraft.GroupID(g), Quiesce: flags&flagQuiesce != 0}
		if err := m.Msg.Unmarshal(p[n : n+int(size)]); err != nil {
			return nil, frameErr("message %d: %v", i, err)
		}
		msgs = append(msgs, m)
		p = p[n+int(size):]
	}
	return msgs, nil
}
